package loopwarden_test

// The guard-policy table (tests/conformance/guard/policy.json) through Guard.Call: each scenario's
// verdict is what a scripted daemon answers the call with, over a real Evaluate stream, so the
// client decodes it as it decodes the daemon's; the Guard does the rest, with its default warning
// handler (the log) and, where the scenario can ask, an ask handler that says no.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
	pb "github.com/loopwarden/loopwarden/client/go/loopwardenv1"
)

type policyScenario struct {
	Name    string          `json:"name"`
	CanAsk  bool            `json:"can_ask"`
	Verdict json.RawMessage `json:"verdict"`
	Expect  policySeen      `json:"expect"`
}

// policySeen is what the agent gets, in the table's words; Reported is asserted only when the
// table says it (a refusal).
type policySeen struct {
	Effect   string `json:"effect"`
	Text     string `json:"text"`
	Reported *bool  `json:"reported"`
}

func loadPolicyScenarios(t *testing.T) []policyScenario {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "tests", "conformance", "guard", "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Scenarios []policyScenario `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &table); err != nil {
		t.Fatal(err)
	}
	return table.Scenarios
}

// policyDaemon answers every tool call with one verdict and every other event with ALLOW, and
// keeps the outcomes it was told.
type policyDaemon struct {
	pb.UnimplementedLoopDetectionServiceServer
	verdict  *pb.Verdict
	mu       sync.Mutex
	outcomes []string
}

func (d *policyDaemon) answer(event *pb.Event) *pb.Verdict {
	d.mu.Lock()
	defer d.mu.Unlock()
	if outcome := event.GetToolOutcome(); outcome != nil {
		d.outcomes = append(d.outcomes, outcome.GetResultJson())
	}
	if event.GetToolCall() == nil {
		return &pb.Verdict{Seq: event.GetSeq(), RunId: event.GetRunId(), Action: pb.Action_ACTION_ALLOW}
	}
	verdict := &pb.Verdict{}
	protojsonClone(d.verdict, verdict)
	verdict.Seq, verdict.RunId = event.GetSeq(), event.GetRunId()
	return verdict
}

func protojsonClone(from, to *pb.Verdict) {
	data, _ := protojson.Marshal(from)
	_ = protojson.Unmarshal(data, to)
}

func (d *policyDaemon) Evaluate(stream grpc.BidiStreamingServer[pb.EvaluateRequest, pb.EvaluateResponse]) error {
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
			response.Verdicts = append(response.Verdicts, d.answer(event))
		}
		if err := stream.Send(response); err != nil {
			return err
		}
	}
}

func (d *policyDaemon) Check(_ context.Context, request *pb.CheckRequest) (*pb.CheckResponse, error) {
	return &pb.CheckResponse{Verdict: d.answer(request.GetEvent())}, nil
}

func startPolicyDaemon(t *testing.T, verdict *pb.Verdict) (*policyDaemon, *loopwarden.Client) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer()
	daemon := &policyDaemon{verdict: verdict}
	pb.RegisterLoopDetectionServiceServer(server, daemon)
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(server.Stop)
	client, err := loopwarden.New(listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return daemon, client
}

func TestGuardPolicy(t *testing.T) {
	for _, scenario := range loadPolicyScenarios(t) {
		t.Run(scenario.Name, func(t *testing.T) {
			verdict := &pb.Verdict{}
			if err := protojson.Unmarshal(scenario.Verdict, verdict); err != nil {
				t.Fatal(err)
			}
			daemon, client := startPolicyDaemon(t, verdict)
			var asked []string
			var opts []loopwarden.GuardOption
			if scenario.CanAsk {
				opts = append(opts, loopwarden.WithAskHandler(func(_ context.Context, v loopwarden.Verdict) loopwarden.AskAnswer {
					asked = append(asked, v.Message)
					return loopwarden.AskDeny
				}))
			}
			guard := loopwarden.NewGuard(client, "run", opts...)
			// The default warning handler writes to the standard logger: read it there.
			var logged bytes.Buffer
			flags, out := log.Flags(), log.Writer()
			log.SetFlags(0)
			log.SetOutput(&logged)
			ran := false
			result, err := guard.Call(context.Background(), "read", map[string]any{"path": "/x"},
				func(context.Context) (any, error) { ran = true; return "contents", nil }, loopwarden.WithToolCallID("c1"))
			log.SetFlags(flags)
			log.SetOutput(out)

			var seen policySeen
			var aborted *loopwarden.RunAbortedError
			switch {
			case errors.As(err, &aborted):
				seen = policySeen{Effect: "end_run", Text: strings.TrimPrefix(err.Error(), "loopwarden: run aborted: ")}
			case err != nil:
				t.Fatal(err)
			case len(asked) > 0:
				seen = policySeen{Effect: "ask", Text: asked[0]}
			case ran && logged.Len() > 0:
				seen = policySeen{Effect: "run_with_warning",
					Text: strings.TrimSuffix(strings.TrimPrefix(logged.String(), "loopwarden: "), "\n")}
			case ran:
				seen = policySeen{Effect: "run"}
			default:
				blocked, ok := result.(loopwarden.BlockedToolResult)
				if !ok {
					t.Fatalf("the call neither ran nor was refused: %T %v", result, result)
				}
				seen = policySeen{Effect: "refuse", Text: blocked.Content[0].Text}
			}
			if scenario.Expect.Reported != nil {
				reported := false
				want, _ := json.Marshal(loopwarden.NewBlockedToolResult(loopwarden.VerdictFromMessage(verdict)))
				for _, outcome := range daemon.outcomes {
					var got, expected any
					_ = json.Unmarshal([]byte(outcome), &got)
					_ = json.Unmarshal(want, &expected)
					reported = reported || reflect.DeepEqual(got, expected)
				}
				seen.Reported = &reported
			}
			if !reflect.DeepEqual(scenario.Expect, seen) {
				t.Fatalf("got %s, want %s", describeSeen(seen), describeSeen(scenario.Expect))
			}
		})
	}
}

func describeSeen(s policySeen) string {
	text := s.Effect + "(" + s.Text + ")"
	if s.Reported != nil {
		if *s.Reported {
			return text + " reported"
		}
		return text + " not reported"
	}
	return text
}
