// Package loopwarden is the Go client of the loopwarden daemon: ask before each tool call, report
// each outcome, and let a Guard turn the daemon's verdicts into what a runner does.
//
// A Guard runs a tool only when the daemon allows it, and reports what the tool returned:
//
//	client, err := loopwarden.New(loopwarden.DefaultTarget, loopwarden.WithAgentID("coder"))
//	if err != nil {
//		return err
//	}
//	defer client.Close()
//	guard := loopwarden.NewGuard(client, "run-42")
//	read := loopwarden.GuardTool(guard, "read", func(ctx context.Context, p ReadParams) (any, error) {
//		data, err := os.ReadFile(p.Path)
//		return string(data), err
//	})
//	result, err := read(ctx, ReadParams{Path: "/etc/hosts"}) // BLOCK: a loopwarden.BlockedToolResult
//
// Without a Guard, the Client's verbs send one event each and return its Verdict:
//
//	verdict, err := client.ToolCall(ctx, "run-42", "read", map[string]any{"path": "/etc/hosts"})
//	if err == nil && verdict.MayRun() {
//		// run the tool, then report it: client.ToolOutcome(..., loopwarden.WithResult(result))
//	}
//
// Options are WithX values: Option for New, GuardOption for NewGuard, EventOption for one event;
// WithAgentID is all three. The event builders (ToolCallEvent, …) make Events for a batch
// (Client.Evaluate) or the unary Client.Check.
//
// The API speaks in the package's own types (Verdict, Event, RunInspection); the generated stubs
// are in github.com/loopwarden/loopwarden/client/go/loopwardenv1 for those who want the wire types.
package loopwarden
