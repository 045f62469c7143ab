package loopwarden_test

// Run trees, usage, approvals, ASK and the exemption RPCs in the Go client, against a
// scripted gRPC service: what the client puts on the wire (routing headers, fields) and how it
// reads what comes back (an action it does not know is ActionBlock). The daemon's semantics are
// covered by the shared conformance scenarios (conformance_test.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
	pb "github.com/loopwarden/loopwarden/client/go/loopwardenv1"
)

const unknownAction = pb.Action(99) // an action a newer daemon might send

type received struct {
	header string
	event  *pb.Event
}

// scriptedDaemon records every event with its routing header and answers tool calls with the
// scripted actions (ALLOW when none).
type scriptedDaemon struct {
	pb.UnimplementedLoopDetectionServiceServer
	mu        sync.Mutex
	received  []received
	streams   []string
	inspected [][2]string
	script    []pb.Action
	listed    *pb.ListExemptionsRequest
}

var scriptedExemption = &pb.Exemption{Id: "ex-1", AgentId: "coder", ToolName: "read", ArgsHash: "h1", CreatedAt: 10,
	ExpiresAt: 3610, RunId: "root"}

func headerOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if values := md.Get(loopwarden.RoutingHeader); len(values) > 0 {
		return values[0]
	}
	return ""
}

func (s *scriptedDaemon) verdict(header string, event *pb.Event) *pb.Verdict {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received = append(s.received, received{header, event})
	action := pb.Action_ACTION_ALLOW
	if event.GetToolCall() != nil && len(s.script) > 0 {
		action, s.script = s.script[0], s.script[1:]
	}
	message := ""
	if action == pb.Action_ACTION_ASK {
		message = "CRITICAL: held for a human"
	}
	return &pb.Verdict{Seq: event.GetSeq(), RunId: event.GetRunId(), Action: action, Message: message,
		DecisionId: fmt.Sprintf("d-%d", event.GetSeq())}
}

func (s *scriptedDaemon) Evaluate(stream grpc.BidiStreamingServer[pb.EvaluateRequest, pb.EvaluateResponse]) error {
	header := headerOf(stream.Context())
	s.mu.Lock()
	s.streams = append(s.streams, header)
	s.mu.Unlock()
	for {
		request, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		response := &pb.EvaluateResponse{}
		for _, event := range request.GetEvents() {
			response.Verdicts = append(response.Verdicts, s.verdict(header, event))
		}
		if err := stream.Send(response); err != nil {
			return err
		}
	}
}

func (s *scriptedDaemon) Check(ctx context.Context, request *pb.CheckRequest) (*pb.CheckResponse, error) {
	return &pb.CheckResponse{Verdict: s.verdict(headerOf(ctx), request.GetEvent())}, nil
}

func (s *scriptedDaemon) InspectRun(ctx context.Context, request *pb.InspectRunRequest) (*pb.InspectRunResponse, error) {
	s.mu.Lock()
	s.inspected = append(s.inspected, [2]string{headerOf(ctx), request.GetRunId()})
	s.mu.Unlock()
	return &pb.InspectRunResponse{RunId: request.GetRunId(), ParentRunId: "root",
		Children: []string{"grandchild-1", "grandchild-2"}, RootRunId: "root", Depth: 1,
		TreeTotals: &pb.Totals{ToolCalls: 31, ToolMs: 1500, InputTokens: 900, OutputTokens: 100, CostUsd: 0.25,
			WallSeconds: 12.5, Runs: 4},
		RunTotals: &pb.Totals{ToolCalls: 8, Runs: 1}, Exemptions: []*pb.Exemption{scriptedExemption}}, nil
}

func (s *scriptedDaemon) ListExemptions(_ context.Context, request *pb.ListExemptionsRequest) (*pb.ListExemptionsResponse, error) {
	s.listed = request
	return &pb.ListExemptionsResponse{Exemptions: []*pb.Exemption{scriptedExemption}}, nil
}

func (s *scriptedDaemon) RevokeExemption(_ context.Context, request *pb.RevokeExemptionRequest) (*pb.RevokeExemptionResponse, error) {
	if request.GetId() != "ex-1" {
		return nil, status.Errorf(codes.NotFound, "no exemption %s", request.GetId())
	}
	return &pb.RevokeExemptionResponse{Revoked: scriptedExemption}, nil
}

func (s *scriptedDaemon) kinds() []string {
	var out []string
	for _, r := range s.received {
		out = append(out, fmt.Sprintf("%T", r.event.GetKind()))
	}
	return out
}

func (s *scriptedDaemon) headersByRun() map[string][]string {
	seen := map[string][]string{}
	for _, r := range s.received {
		if len(seen[r.event.GetRunId()]) == 0 || seen[r.event.GetRunId()][0] != r.header {
			seen[r.event.GetRunId()] = append(seen[r.event.GetRunId()], r.header)
		}
	}
	return seen
}

// startScripted serves a scriptedDaemon on loopback and returns it with a client of it.
func startScripted(t *testing.T, opts ...loopwarden.Option) (*scriptedDaemon, *loopwarden.Client) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	scripted := &scriptedDaemon{}
	pb.RegisterLoopDetectionServiceServer(server, scripted)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	client, err := loopwarden.New(listener.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return scripted, client
}

func sameResult(context.Context) (any, error) { return "same", nil }

func TestAnUnknownActionIsBlockAndTheGuardDoesNotRunTheTool(t *testing.T) {
	scripted, client := startScripted(t)
	scripted.script = []pb.Action{unknownAction, unknownAction}
	ctx := context.Background()
	verdict, err := client.ToolCall(ctx, "r", "read", map[string]int{"p": 1})
	if err != nil || verdict.Action != loopwarden.ActionBlock {
		t.Fatalf("an unknown action must read as block: %v %v", verdict.Action, err)
	}
	runs := 0
	result, err := loopwarden.NewGuard(client, "r").Call(ctx, "read", nil, func(context.Context) (any, error) {
		runs++
		return "ran", nil
	})
	if _, blocked := result.(loopwarden.BlockedToolResult); err != nil || !blocked || runs != 0 {
		t.Fatalf("the guard ran the tool (%d) or did not block: %#v %v", runs, result, err)
	}
}

func TestEventBuildersForUsageApprovalAndDuration(t *testing.T) {
	scripted, client := startScripted(t)
	ctx := context.Background()
	if _, err := client.ToolOutcome(ctx, "r", "read", nil, loopwarden.WithResult(1), loopwarden.WithDuration(1234*time.Millisecond),
		loopwarden.WithAcceptsAsk(true)); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Approval(ctx, "r", loopwarden.Approval{DecisionID: "d-9", Approved: true, Scope: loopwarden.ScopeOnce,
		TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	outcome, approval := scripted.received[0].event, scripted.received[1].event.GetApproval()
	if outcome.GetToolOutcome().GetDurationMs() != 1234 || !outcome.GetAcceptsAsk() {
		t.Fatalf("outcome: %v", outcome)
	}
	if approval.GetDecisionId() != "d-9" || approval.GetScope() != pb.ApprovalScope_APPROVAL_SCOPE_ONCE || approval.GetTtlSeconds() != 60 {
		t.Fatalf("approval: %v", approval)
	}
	usage := loopwarden.UsageEvent("c", loopwarden.Usage{InputTokens: 500, OutputTokens: 100, CostUSD: 0.5, Model: "m"})
	if verdicts, err := client.Evaluate(ctx, usage); err != nil || verdicts[0].Action != loopwarden.ActionAllow {
		t.Fatalf("usage: %v %v", verdicts, err)
	}
	if got := scripted.received[2].event.GetUsage(); got.GetInputTokens() != 500 || got.GetCostUsd() != 0.5 || got.GetModel() != "m" {
		t.Fatalf("usage event: %v", got)
	}
	if _, err := loopwarden.ApprovalEvent("r", loopwarden.Approval{Approved: true}); err == nil {
		t.Fatal("an approval naming no call must be refused")
	}
	if _, err := loopwarden.ApprovalEvent("r", loopwarden.Approval{ToolCallID: "c", Scope: "forever"}); err == nil {
		t.Fatal("an unknown scope must be refused")
	}
	if _, err := client.Approval(context.Background(), "r", loopwarden.Approval{Approved: true}); err == nil {
		t.Fatal("Client.Approval must refuse an approval naming no call before sending")
	}
}

func TestAGuardsChildrenShareTheRootsStreamInPerRunMode(t *testing.T) {
	scripted, client := startScripted(t, loopwarden.WithPerRunStreams(8))
	ctx := context.Background()
	root := loopwarden.NewGuard(client, "root")
	child := root.Child("child")
	grandchild := child.Child("grandchild")
	for _, g := range []*loopwarden.Guard{root, child, grandchild} {
		if _, err := g.Call(ctx, "read", map[string]int{"p": 1}, sameResult); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.RunEnd(ctx, "grandchild"); err != nil {
		t.Fatal(err)
	}
	if got := client.RootOf("child"); got != "root" {
		t.Fatalf("the child's root is %q", got)
	}
	want := map[string][]string{"root": {"root"}, "child": {"root"}, "grandchild": {"root"}}
	if got := scripted.headersByRun(); !reflect.DeepEqual(want, got) {
		t.Fatalf("routing headers by run: %v", got)
	}
	if !reflect.DeepEqual([]string{"root"}, scripted.streams) {
		t.Fatalf("one stream for the tree, named by its root; got %v", scripted.streams)
	}
	parents := map[string]string{}
	for _, r := range scripted.received {
		if r.event.GetToolCall() != nil {
			parents[r.event.GetRunId()] = r.event.GetParentRunId()
		}
	}
	if want := map[string]string{"root": "", "child": "root", "grandchild": "child"}; !reflect.DeepEqual(want, parents) {
		t.Fatalf("parent run ids: %v", parents)
	}
}

func TestCheckAndInspectOfAChildCarryTheRootsHeader(t *testing.T) {
	scripted, client := startScripted(t, loopwarden.WithPerRunStreams(8))
	ctx := context.Background()
	event, err := loopwarden.ToolCallEvent("child", "read", nil, loopwarden.WithParentRunID("root"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Check(ctx, event); err != nil {
		t.Fatal(err)
	}
	view, err := client.Inspect(ctx, "child")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Usage(ctx, "sub", loopwarden.Usage{InputTokens: 3}, loopwarden.WithParentRunID("orchestrator"),
		loopwarden.WithRootRunID("session-root")); err != nil {
		t.Fatal(err)
	}
	if want := [][2]string{{"root", "child"}}; !reflect.DeepEqual(want, scripted.inspected) {
		t.Fatalf("inspect routed as %v", scripted.inspected)
	}
	if want := map[string][]string{"child": {"root"}, "sub": {"session-root"}}; !reflect.DeepEqual(want, scripted.headersByRun()) {
		t.Fatalf("routing headers by run: %v", scripted.headersByRun())
	}
	usage := scripted.received[1].event.GetUsage()
	if usage.GetInputTokens() != 3 || scripted.received[1].event.GetParentRunId() != "orchestrator" {
		t.Fatalf("usage event: %v", scripted.received[1].event)
	}
	wantView := []any{"root", []string{"grandchild-1", "grandchild-2"}, "root", uint32(1),
		loopwarden.Totals{ToolCalls: 31, ToolMs: 1500, InputTokens: 900, OutputTokens: 100, CostUSD: 0.25, WallSeconds: 12.5, Runs: 4},
		uint64(8), []loopwarden.Exemption{{ID: "ex-1", AgentID: "coder", ToolName: "read", ArgsHash: "h1", CreatedAt: 10,
			ExpiresAt: 3610, RunID: "root"}}}
	gotView := []any{view.ParentRunID, view.Children, view.RootRunID, view.Depth, view.TreeTotals, view.RunTotals.ToolCalls,
		view.Exemptions}
	if !reflect.DeepEqual(wantView, gotView) {
		t.Fatalf("inspection's tree fields: %v", gotView)
	}
}

func TestAGuardWithoutAnAskHandlerDoesNotAcceptAsk(t *testing.T) {
	scripted, client := startScripted(t, loopwarden.WithAcceptsAsk(true))
	if _, err := loopwarden.NewGuard(client, "r").Call(context.Background(), "read", nil, sameResult); err != nil {
		t.Fatal(err)
	}
	for _, r := range scripted.received {
		if r.event.GetAcceptsAsk() {
			t.Fatalf("a guard that cannot ask said accepts_ask: %v", r.event)
		}
	}
	if _, err := client.ToolCall(context.Background(), "r", "read", nil); err != nil {
		t.Fatal(err)
	}
	if !scripted.received[len(scripted.received)-1].event.GetAcceptsAsk() {
		t.Fatal("WithAcceptsAsk(true) on New must hold for the client's verbs")
	}
}

func TestApprovedAlwaysRunsTheToolAndReportsTheAnswer(t *testing.T) {
	scripted, client := startScripted(t)
	scripted.script = []pb.Action{pb.Action_ACTION_ASK}
	var asked []string
	guard := loopwarden.NewGuard(client, "r", loopwarden.WithAskHandler(func(_ context.Context, v loopwarden.Verdict) loopwarden.AskAnswer {
		asked = append(asked, v.Message)
		return loopwarden.AskAlways
	}))
	result, err := guard.Call(context.Background(), "read", map[string]int{"p": 1}, sameResult, loopwarden.WithToolCallID("c21"))
	if err != nil || result != "same" {
		t.Fatalf("approved: the tool must run: %v %v", result, err)
	}
	if want := []string{"*loopwardenv1.Event_ToolCall", "*loopwardenv1.Event_Approval", "*loopwardenv1.Event_ToolOutcome"}; !reflect.DeepEqual(want, scripted.kinds()) {
		t.Fatalf("events: %v", scripted.kinds())
	}
	approval := scripted.received[1].event.GetApproval()
	if approval.GetToolCallId() != "c21" || !approval.GetApproved() || approval.GetScope() != pb.ApprovalScope_APPROVAL_SCOPE_ALWAYS {
		t.Fatalf("approval: %v", approval)
	}
	if !reflect.DeepEqual([]string{"CRITICAL: held for a human"}, asked) {
		t.Fatalf("the handler saw %v", asked)
	}
	for _, r := range scripted.received {
		if !r.event.GetAcceptsAsk() {
			t.Fatalf("a guard with a handler must say accepts_ask: %v", r.event)
		}
	}
}

func TestDeniedDoesNotRunTheTool(t *testing.T) {
	scripted, client := startScripted(t)
	scripted.script = []pb.Action{pb.Action_ACTION_ASK}
	runs := 0
	guard := loopwarden.NewGuard(client, "r", loopwarden.WithAskHandler(func(context.Context, loopwarden.Verdict) loopwarden.AskAnswer {
		return loopwarden.AskDeny
	}))
	result, err := guard.Call(context.Background(), "read", nil, func(context.Context) (any, error) { runs++; return "ran", nil })
	if _, blocked := result.(loopwarden.BlockedToolResult); err != nil || !blocked || runs != 0 {
		t.Fatalf("denied: the blocked result, the tool not run (%d): %#v %v", runs, result, err)
	}
	approval := scripted.received[1].event.GetApproval()
	if approval.GetApproved() || approval.GetToolCallId() != "" || approval.GetDecisionId() != "d-1" {
		t.Fatalf("a denial naming the ASK's decision id: %v", approval)
	}
}

func TestExemptionRPCs(t *testing.T) {
	scripted, client := startScripted(t)
	ctx := context.Background()
	want := loopwarden.Exemption{ID: "ex-1", AgentID: "coder", ToolName: "read", ArgsHash: "h1", CreatedAt: 10, ExpiresAt: 3610,
		RunID: "root"}
	listed, err := client.ListExemptions(ctx, loopwarden.ExemptionFilter{ToolName: "read"})
	if err != nil || !reflect.DeepEqual([]loopwarden.Exemption{want}, listed) || scripted.listed.GetToolName() != "read" {
		t.Fatalf("ListExemptions: %v %v %v", listed, err, scripted.listed)
	}
	if revoked, err := client.RevokeExemption(ctx, "ex-1"); err != nil || revoked != want {
		t.Fatalf("RevokeExemption: %v %v", revoked, err)
	}
	if _, err := client.RevokeExemption(ctx, "ex-404"); !errors.Is(err, loopwarden.ErrExemptionNotFound) {
		t.Fatalf("an unknown id must be ErrExemptionNotFound: %v", err)
	}
}

func TestModelOutputEventsCarryTheirTextKindStopFlagAndUsage(t *testing.T) {
	scripted, client := startScripted(t)
	ctx := context.Background()
	if _, err := client.ModelOutput(ctx, "r", loopwarden.ModelOutput{Text: "Done.", Kind: loopwarden.OutputFinalAnswer,
		StopHookActive: true, Usage: &loopwarden.Usage{InputTokens: 7, OutputTokens: 3, CostUSD: 0.25, Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	bare, err := loopwarden.ModelOutputEvent("r", loopwarden.ModelOutput{TextDigest: "d1", Kind: loopwarden.OutputThought})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Evaluate(ctx, bare); err != nil {
		t.Fatal(err)
	}
	said, thought := scripted.received[0].event.GetModelOutput(), scripted.received[1].event.GetModelOutput()
	if said.GetText() != "Done." || said.GetOutputKind() != pb.OutputKind_OUTPUT_KIND_FINAL_ANSWER || !said.GetStopHookActive() ||
		said.GetUsage().GetInputTokens() != 7 || said.GetUsage().GetCostUsd() != 0.25 {
		t.Fatalf("model output: %v", said)
	}
	if thought.GetTextDigest() != "d1" || thought.GetOutputKind() != pb.OutputKind_OUTPUT_KIND_THOUGHT || thought.GetUsage() != nil {
		t.Fatalf("a digest alone, no usage: %v", thought)
	}
	if _, err := loopwarden.ModelOutputEvent("r", loopwarden.ModelOutput{Text: "x", Kind: "shout"}); err == nil {
		t.Fatal("an unknown output kind must be refused")
	}
}
