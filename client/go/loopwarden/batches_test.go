package loopwarden_test

// WithBatchID and WithToolClass against the real daemon under `loopwarden: {preset: "fast"}`
// (parallel batches and the duplicate side-effect guard on): the fields reach the engine.

import (
	"strings"
	"testing"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
)

// fastConfig is the daemon config of the batch and tool-class tests.
var fastConfig = map[string]any{"loopwarden": map[string]any{"preset": "fast"}}

func TestABatchIDGroupsOneTurnsCalls(t *testing.T) {
	ctx, client := testContext(t), newClient(t, fastConfig)
	params := map[string]any{"path": "a"}
	// Three turns of three identical reads, each reported with its outcome: each turn counts once
	// (fast blocks at the 3rd identical outcome, so nine calls one by one would be blocked).
	for turn := range 3 {
		batch := loopwarden.WithBatchID("turn-" + string(rune('a'+turn)))
		for range 3 {
			verdict, err := client.ToolCall(ctx, "go/batches", "read", params, batch)
			if err != nil || !verdict.MayRun() {
				t.Fatalf("turn %d: %+v, err %v", turn, verdict, err)
			}
			if _, err := client.ToolOutcome(ctx, "go/batches", "read", params, loopwarden.WithResult("same")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Without batch ids the same reads are repeats: the 4th is blocked (fast: sameOutcome 3).
	var last loopwarden.Verdict
	for range 4 {
		verdict, err := client.ToolCall(ctx, "go/no-batches", "read", params)
		if err != nil {
			t.Fatal(err)
		}
		last = verdict
		if _, err := client.ToolOutcome(ctx, "go/no-batches", "read", params, loopwarden.WithResult("same")); err != nil {
			t.Fatal(err)
		}
	}
	if last.Action != loopwarden.ActionBlock {
		t.Fatalf("4th identical read without batch ids: %+v, want BLOCK", last)
	}
}

func TestAToolClassReachesTheDuplicateSideEffectGuard(t *testing.T) {
	ctx, client := testContext(t), newClient(t, fastConfig)
	email := map[string]any{"to": "ops@example.com", "body": "deploy done"}
	send := func(run string, opts ...loopwarden.EventOption) loopwarden.Verdict {
		t.Helper()
		verdict, err := client.ToolCall(ctx, run, "send_email", email, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if verdict.MayRun() {
			if _, err := client.ToolOutcome(ctx, run, "send_email", email, loopwarden.WithResult("sent")); err != nil {
				t.Fatal(err)
			}
		}
		return verdict
	}
	mutating := loopwarden.WithToolClass("mutating")
	if first, second := send("go/mutating", mutating), send("go/mutating", mutating); !first.MayRun() ||
		second.Action != loopwarden.ActionBlock || second.Detector != "duplicate_side_effect" {
		t.Fatalf("a mutating tool sent twice: %+v then %+v, want ALLOW then BLOCK duplicate_side_effect", first, second)
	}
	if first, second := send("go/unclassed"), send("go/unclassed"); !first.MayRun() || !second.MayRun() {
		t.Fatalf("a tool of no class sent twice: %+v then %+v, want both to run", first, second)
	}
}

func TestAnUnknownToolClassIsAnErrorThatNamesTheClasses(t *testing.T) {
	_, err := loopwarden.ToolCallEvent("r", "read", nil, loopwarden.WithToolClass("readonly"))
	if err == nil || !strings.Contains(err.Error(), `"readOnly"`) || !strings.Contains(err.Error(), `"readonly"`) {
		t.Fatalf("err = %v, want one naming the classes and the value", err)
	}
	for _, class := range []string{"", "readOnly", "mutating", "poll"} {
		if _, err := loopwarden.ToolCallEvent("r", "read", nil, loopwarden.WithToolClass(class)); err != nil {
			t.Fatalf("class %q: %v", class, err)
		}
	}
}
