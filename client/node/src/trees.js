// @ts-check
/**
 * Each run's tree root, as far as this client has seen it: what the routing header names.
 *
 * A child run (an event with parentRunId) is stored and routed with its whole tree, so the
 * x-loopwarden-run-id header of its stream, Check and InspectRun names the tree's ROOT run. The
 * events say only the parent; the client learns the chain from the events it sends (a child's
 * root is its parent's root) and from an explicit `rootRunId` (a sub-agent in another process).
 * Bounded: the least recently used runs are forgotten first, and a forgotten run routes by its
 * own id, as a root does.
 */

export const DEFAULT_CAPACITY = 65536;

export class RunTrees {
  /** @param {number} [capacity] */
  constructor(capacity = DEFAULT_CAPACITY) {
    /** @private @type {Map<string, string>} child run id -> root run id, least recently used first */
    this.roots = new Map();
    /** @private */
    this.capacity = capacity;
  }

  /** The root of runId's tree (runId itself for a root or a run never seen as a child). @param {string} runId */
  root(runId) {
    const id = runId.trim();
    const root = this.roots.get(id);
    if (root === undefined) return id;
    this.roots.delete(id);
    this.roots.set(id, root);
    return root;
  }

  /**
   * Note what one event says of its run's place; returns the run's root. An explicit root wins; a
   * parent places a run not placed yet (a run's parent is fixed by its first event).
   * @param {string} runId @param {string} [parentRunId] @param {string} [rootRunId]
   */
  learn(runId, parentRunId = '', rootRunId = '') {
    const id = runId.trim();
    const parent = parentRunId.trim();
    const explicit = rootRunId.trim();
    let root;
    if (explicit && explicit !== id) root = explicit;
    else if (parent && parent !== id && !this.roots.has(id)) root = this.root(parent);
    else return this.root(id);
    this.roots.delete(id);
    this.roots.set(id, root);
    while (this.roots.size > this.capacity) {
      const oldest = this.roots.keys().next().value;
      if (oldest === undefined) break;
      this.roots.delete(oldest);
    }
    return root;
  }

  /** The run ended: its entry is no longer needed (its children keep theirs). @param {string} runId */
  forget(runId) {
    this.roots.delete(runId.trim());
  }
}
