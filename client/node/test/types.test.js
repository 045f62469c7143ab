// @ts-check
// The published declarations (`npm run build:types`) are the public API and nothing else: built
// into a temp dir, read with the TypeScript compiler, compared with the lists below. A helper
// exported by accident, a grpc-js type in a signature or a new member of LoopwardenClient fails
// here until it is added to a list, on purpose.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import ts from 'typescript';

import { buildTypes } from '../scripts/build-types.js';
import * as api from '../src/index.js';

const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

const PUBLIC_VALUES = [
  'DETECTORS', 'DEFAULT_PROTO_ROOT', 'DEFAULT_TARGET', 'ERROR_CODES', 'ExemptionNotFound', 'LoopwardenClient', 'LoopwardenError',
  'LoopwardenUnavailable', 'PROTO_PATH', 'RunAborted', 'RunNotFound', 'SERVICE_NAME', 'approvalEvent', 'blockedToolResult',
  'compactionRetryEvent', 'guardTool', 'loadService', 'mayRun', 'modelOutputEvent', 'runEndEvent', 'toolCallEvent', 'toolOutcomeEvent',
  'usageEvent', 'userTurnEvent', 'verdictFromMessage',
  // tracing.js: the GenAI guardrail conventions' names and opt-in
  'CONVENTIONS_COMMIT', 'GUARDRAIL_RESULT_EVENT', 'GUARDRAIL_SPAN', 'OPT_IN_VARIABLE', 'optedIn',
];
const PUBLIC_TYPES = [
  'Action', 'ApprovalOptions', 'AskAnswer', 'ClientOptions', 'EffectiveConfig', 'EventExtra', 'EventOptions', 'Exemption', 'GuardOptions',
  'ModelOutputOptions', 'OutcomeOptions', 'OutputStreaks', 'RunInspection', 'RunRecord', 'Totals', 'UsageOptions', 'Verdict',
];
const CLIENT_MEMBERS = [
  'acceptsAsk', 'agentId', 'approval', 'check', 'close', 'compactionRetry', 'evaluate', 'inspect', 'listExemptions', 'modelOutput',
  'revokeExemption', 'rootOf', 'runEnd', 'send', 'timeoutMs', 'toolCall', 'toolOutcome', 'usage', 'userTurn',
  'tracing', // the guardrail spans (tracing.js), null without the GenAI opt-in
];
// The one grpc-js name callers meet: ClientOptions.credentials.
const GRPC_NAMES = ['ChannelCredentials'];

const sorted = (/** @type {Iterable<string>} */ names) => [...new Set(names)].sort();

/** @type {string} */
let scratch;
/** @type {string} */
let typesDir;
/** @type {ts.Program} */
let program;
/** @type {ts.SourceFile} */
let bundle;

before(() => {
  // Laid out like the installed package: package.json (an ES module), types/, its dependencies.
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'loopwarden-types-'));
  fs.writeFileSync(path.join(scratch, 'package.json'), '{"type": "module"}\n');
  fs.symlinkSync(path.join(PACKAGE_ROOT, 'node_modules'), path.join(scratch, 'node_modules'), 'dir');
  typesDir = path.join(scratch, 'types');
  const file = buildTypes(typesDir);
  program = ts.createProgram([file], {
    module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022,
    strict: true, noEmit: true, types: ['node'],
  });
  bundle = /** @type {ts.SourceFile} */ (program.getSourceFile(file));
});

after(() => {
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

/** @returns {ts.Symbol[]} */
function bundleExports() {
  const checker = program.getTypeChecker();
  return checker.getExportsOfModule(/** @type {ts.Symbol} */ (checker.getSymbolAtLocation(bundle)));
}

describe('the published declarations', () => {
  test('are one file', () => {
    assert.deepStrictEqual(['index.d.ts'], fs.readdirSync(typesDir));
  });

  test('export exactly the public names', () => {
    assert.deepStrictEqual(sorted([...PUBLIC_VALUES, ...PUBLIC_TYPES]), sorted(bundleExports().map((s) => s.name)));
  });

  test('give LoopwardenClient only its verbs and settings as public members', () => {
    const checker = program.getTypeChecker();
    const symbol = /** @type {ts.Symbol} */ (bundleExports().find((s) => s.name === 'LoopwardenClient'));
    const members = checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(symbol)).filter((member) =>
      (member.declarations ?? []).every((d) => !(ts.getCombinedModifierFlags(d) & ts.ModifierFlags.NonPublicAccessibilityModifier)));
    assert.deepStrictEqual(sorted(CLIENT_MEMBERS), sorted(members.map((m) => m.name)));
  });

  test('name nothing of @grpc/grpc-js but ChannelCredentials, and no other module', () => {
    /** @type {string[]} */
    const modules = [];
    /** @type {string[]} */
    const grpcNames = [];
    /** @param {ts.Node} node */
    const visit = (node) => {
      if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
        modules.push(node.argument.literal.text);
        if (node.qualifier) grpcNames.push(node.qualifier.getText(bundle));
      } else if (ts.isImportDeclaration(node) || (ts.isExportDeclaration(node) && node.moduleSpecifier)) {
        modules.push(/** @type {ts.StringLiteral} */ (node.moduleSpecifier).text);
        const clause = ts.isImportDeclaration(node) ? node.importClause : undefined;
        if (clause?.namedBindings && ts.isNamedImports(clause.namedBindings)) {
          grpcNames.push(...clause.namedBindings.elements.map((e) => (e.propertyName ?? e.name).text));
        } else if (clause) {
          grpcNames.push('<the whole module>');
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(bundle);
    assert.deepStrictEqual(['@grpc/grpc-js'], sorted(modules));
    assert.deepStrictEqual(GRPC_NAMES, sorted(grpcNames));
  });

  test('type-check under --strict', () => {
    const diagnostics = [...program.getSyntacticDiagnostics(bundle), ...program.getSemanticDiagnostics(bundle)];
    assert.deepStrictEqual([], diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')));
  });
});

describe('src/index.js', () => {
  test('exports exactly the public values at run time', () => {
    assert.deepStrictEqual(sorted(PUBLIC_VALUES), sorted(Object.keys(api)));
  });

  test('only re-exports', () => {
    const file = path.join(PACKAGE_ROOT, 'src', 'index.js');
    const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const other = source.statements.filter((s) => !(ts.isExportDeclaration(s) && s.moduleSpecifier));
    assert.deepStrictEqual([], other.map((s) => s.getText(source)));
  });
});
