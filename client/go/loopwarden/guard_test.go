package loopwarden_test

// Guard, Inspect and the failure modes against the real daemon: the semantics of the Python
// ToolGuard (loopwarden.runner).

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
)

var same = map[string]any{"content": []any{map[string]any{"type": "text", "text": "same"}}, "details": map[string]any{"ok": true}}

func TestGuardWarnsThenBlocksWithoutRunningTheTool(t *testing.T) {
	ctx, client := testContext(t), newClient(t, guardConfig)
	runs := 0
	var warnings []loopwarden.Verdict
	guard := loopwarden.NewGuard(client, "guard/block", loopwarden.WithWarningHandler(func(v loopwarden.Verdict) {
		warnings = append(warnings, v)
	}))
	read := loopwarden.GuardTool(guard, "read", func(context.Context, map[string]any) (any, error) {
		runs++
		return same, nil
	})
	var results []any
	for i := 0; i < 21; i++ {
		result, err := read(ctx, map[string]any{"path": "/x"})
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, result)
	}
	if runs != 20 {
		t.Fatalf("the tool ran %d times, want 20", runs)
	}
	if !reflect.DeepEqual(same, results[19]) {
		t.Fatalf("20th result %v", results[19])
	}
	if len(warnings) == 0 || warnings[0].Detector != "generic_repeat" || warnings[0].Level != "warning" {
		t.Fatalf("warnings %+v", warnings)
	}
	blocked, ok := results[20].(loopwarden.BlockedToolResult)
	if !ok {
		t.Fatalf("21st result is %T, want BlockedToolResult", results[20])
	}
	want := loopwarden.BlockedDetails{Status: "blocked", DeniedReason: "tool-loop", Detector: "generic_repeat", Count: 20}
	if blocked.Details != want || blocked.Content[0].Type != "text" || blocked.Content[0].Text == "" {
		t.Fatalf("blocked result %+v", blocked)
	}
	inspection, err := client.Inspect(ctx, "guard/block")
	if err != nil {
		t.Fatal(err)
	}
	if inspection.Blocks != 1 || inspection.Records[len(inspection.Records)-1].ResultHash == "" {
		t.Fatalf("inspection %+v", inspection)
	}
}

func TestGuardReportsAnErrorAndReturnsIt(t *testing.T) {
	ctx, client := testContext(t), newClient(t, guardConfig)
	boom := errors.New("boom")
	_, err := loopwarden.NewGuard(client, "guard/error").Call(ctx, "exec", map[string]any{"command": "false"},
		func(context.Context) (any, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	inspection, err := client.Inspect(ctx, "guard/error")
	if err != nil {
		t.Fatal(err)
	}
	if len(inspection.Records) != 1 || inspection.Records[0].ResultHash == "" {
		t.Fatalf("records %+v", inspection.Records)
	}
}

func TestGuardAbortsAfterThePostCompactionGuardAndRunsNothingMore(t *testing.T) {
	ctx, client := testContext(t), newClient(t, guardConfig)
	runs := 0
	guard := loopwarden.NewGuard(client, "guard/abort")
	gateway := loopwarden.GuardTool(guard, "gateway", func(context.Context, map[string]any) (any, error) {
		runs++
		return map[string]any{"content": []any{}}, nil
	})
	if _, err := client.CompactionRetry(ctx, "guard/abort"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := gateway(ctx, map[string]any{"action": "lookup"}); err != nil {
			t.Fatal(err)
		}
	}
	var aborted *loopwarden.RunAbortedError
	if _, err := gateway(ctx, map[string]any{"action": "lookup"}); !errors.As(err, &aborted) ||
		aborted.Verdict.ErrorCode != "compaction_loop_persisted" {
		t.Fatalf("third call: err = %v, want RunAbortedError(compaction_loop_persisted)", err)
	}
	if _, err := gateway(ctx, map[string]any{"action": "lookup"}); !errors.As(err, &aborted) || runs != 3 {
		t.Fatalf("fourth call: err = %v, runs = %d; want RunAbortedError and 3 runs", err, runs)
	}
}

func TestGuardFailsOpenByDefaultWhenTheDaemonIsUnreachable(t *testing.T) {
	ctx := testContext(t)
	offline, err := loopwarden.New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer offline.Close()
	ran := func(context.Context) (any, error) { return "ran", nil }
	result, err := loopwarden.NewGuard(offline, "guard/offline").Call(ctx, "read", nil, ran)
	if err != nil || result != "ran" {
		t.Fatalf("fail-open: result %v, err %v", result, err)
	}
	_, err = loopwarden.NewGuard(offline, "guard/offline", loopwarden.WithFailOpen(false)).Call(ctx, "read", nil, ran)
	if !errors.Is(err, loopwarden.ErrUnavailable) {
		t.Fatalf("fail-closed: err = %v, want ErrUnavailable", err)
	}
}

func TestClientNumbersEventsAndEchoesTheRun(t *testing.T) {
	ctx := testContext(t)
	client, err := loopwarden.New(daemonFor(t, guardConfig).target, loopwarden.WithAgentID("a1"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	first, err := client.ToolCall(ctx, "client/seq", "read", map[string]any{"path": "/a"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := client.ToolOutcome(ctx, "client/seq", "read", map[string]any{"path": "/a"}, loopwarden.WithResult("x"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Seq != 1 || second.Seq != 2 || first.RunID != "client/seq" || !first.MayRun() {
		t.Fatalf("verdicts %+v %+v", first, second)
	}
	inspection, err := client.Inspect(ctx, "client/seq")
	if err != nil || inspection.AgentID != "a1" {
		t.Fatalf("inspection %+v, err %v", inspection, err)
	}
	end, err := client.RunEnd(ctx, "client/seq")
	if err != nil || end.Action != loopwarden.ActionAllow {
		t.Fatalf("run end %+v, err %v", end, err)
	}
}

func TestClientIsSafeForConcurrentCalls(t *testing.T) {
	ctx, client := testContext(t), newClient(t, guardConfig)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := uint64(0); i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := client.ToolCall(ctx, "client/concurrent", "read", map[string]any{"n": i}, loopwarden.WithSeq(100+i))
			if err == nil && v.Seq != 100+i {
				err = errors.New("verdict answered another call")
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestClientSendsTheBearerTokenAProtectedDaemonAsksFor(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	protected, err := startDaemon("{}", "--auth-token-file", tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer protected.stop()
	ctx := testContext(t)
	withToken, _ := loopwarden.New(protected.target, loopwarden.WithToken("s3cret"))
	defer withToken.Close()
	without, _ := loopwarden.New(protected.target)
	defer without.Close()
	if v, err := withToken.ToolCall(ctx, "client/token", "read", map[string]any{}); err != nil || v.Action != loopwarden.ActionAllow {
		t.Fatalf("with token: %+v, %v", v, err)
	}
	if _, err := without.ToolCall(ctx, "client/token", "read", map[string]any{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without token: err = %v, want Unauthenticated", err)
	}
}

func TestInspectOfAnUnknownRunIsRunNotFound(t *testing.T) {
	_, err := newClient(t, guardConfig).Inspect(testContext(t), "client/never-seen")
	if !errors.Is(err, loopwarden.ErrRunNotFound) {
		t.Fatalf("err = %v, want ErrRunNotFound", err)
	}
}

func TestAMalformedEventIsRejectedAlone(t *testing.T) {
	v, err := newClient(t, guardConfig).ToolCall(testContext(t), "client/reject", "read", nil,
		loopwarden.WithParamsJSON("{not json"))
	if err != nil || v.Action != loopwarden.ActionReject || v.ErrorCode != "invalid_params_json" {
		t.Fatalf("verdict %+v, err %v", v, err)
	}
}

func TestExampleRunnerGetsBlocked(t *testing.T) {
	cmd := exec.Command("go", "run", "../examples/runner")
	cmd.Env = append(os.Environ(), "LOOPWARDEN_TARGET="+daemonFor(t, guardConfig).target)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("example runner: %v\n%s", err, out)
	}
	for _, want := range []string{"warning (generic_repeat, 10)", "turn 21: blocked by generic_repeat after 20 repeats"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("example output lacks %q:\n%s", want, out)
		}
	}
}
