package loopwarden

import (
	"container/list"
	"strings"
	"sync"
)

// defaultTreeCapacity bounds the child runs a Client remembers the root of.
const defaultTreeCapacity = 65536

// runTrees is each run's tree root, as far as the client has seen it: what the RoutingHeader
// names. A child run (an event with a parent run id) is stored and routed with its whole tree, so
// the header of its stream, Check and Inspect names the tree's ROOT run. The events say only the
// parent; the client learns the chain from the events it sends (a child's root is its parent's
// root) and from an explicit WithRootRunID (a sub-agent in another process). Bounded: the least
// recently used runs are forgotten first, and a forgotten run routes by its own id, as a root does.
type runTrees struct {
	mu       sync.Mutex
	capacity int
	roots    map[string]*list.Element // child run id -> element of order (a treeEntry)
	order    *list.List               // least recently used first
}

type treeEntry struct{ runID, root string }

func newRunTrees(capacity int) *runTrees {
	return &runTrees{capacity: capacity, roots: map[string]*list.Element{}, order: list.New()}
}

// root is the root of runID's tree (runID itself for a root or a run never seen as a child).
func (t *runTrees) root(runID string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rootLocked(strings.TrimSpace(runID))
}

func (t *runTrees) rootLocked(id string) string {
	element, ok := t.roots[id]
	if !ok {
		return id
	}
	t.order.MoveToBack(element)
	return element.Value.(treeEntry).root
}

// learn notes what one event says of its run's place and returns the run's root. An explicit
// root wins; a parent places a run not placed yet (a run's parent is fixed by its first event).
func (t *runTrees) learn(runID, parentRunID, rootRunID string) string {
	id, parent, explicit := strings.TrimSpace(runID), strings.TrimSpace(parentRunID), strings.TrimSpace(rootRunID)
	t.mu.Lock()
	defer t.mu.Unlock()
	_, known := t.roots[id]
	var root string
	switch {
	case explicit != "" && explicit != id:
		root = explicit
	case parent != "" && parent != id && !known:
		root = t.rootLocked(parent)
	default:
		return t.rootLocked(id)
	}
	if element, ok := t.roots[id]; ok {
		t.order.Remove(element)
	}
	t.roots[id] = t.order.PushBack(treeEntry{id, root})
	for t.order.Len() > t.capacity {
		oldest := t.order.Front()
		t.order.Remove(oldest)
		delete(t.roots, oldest.Value.(treeEntry).runID)
	}
	return root
}

// forget drops an ended run's entry (its children keep theirs).
func (t *runTrees) forget(runID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if element, ok := t.roots[strings.TrimSpace(runID)]; ok {
		t.order.Remove(element)
		delete(t.roots, strings.TrimSpace(runID))
	}
}
