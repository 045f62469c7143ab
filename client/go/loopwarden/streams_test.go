package loopwarden_test

import (
	"context"
	"testing"
	"time"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
)

// The per-run stream mode against a real daemon whose streams idle out after 0.3 s: a run's
// stream closed for idleness is reopened on its next event, and the run's counts go on.
func TestPerRunStreamsReopenAfterAnIdleClose(t *testing.T) {
	d, err := startDaemon(`{"tools": {"loopDetection": {"enabled": true}}}`, "--stream-idle-timeout", "0.3")
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	client, err := loopwarden.New(d.target, loopwarden.WithPerRunStreams(2))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if _, err := client.ToolCall(ctx, "go-idle", "read", map[string]int{"p": 1}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // past the daemon's --stream-idle-timeout: it closes the stream
	var last loopwarden.Verdict
	for i := 0; i < 6; i++ {
		if last, err = client.ToolCall(ctx, "go-idle", "read", map[string]int{"p": 1}); err != nil {
			t.Fatalf("call %d after the idle close: %v", i+6, err)
		}
	}
	if last.Action != loopwarden.ActionWarn || last.Count != 10 {
		t.Fatalf("the 11th identical call: want WARN with count 10, got %s %d", last.Action, last.Count)
	}
	// Three runs over a cap of two streams, a batch of two runs, Check and Inspect with the header.
	for _, run := range []string{"go-a", "go-b", "go-c"} {
		if _, err := client.ToolCall(ctx, run, "read", nil); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := loopwarden.ToolCallEvent("go-a", "read", nil, loopwarden.WithSeq(100))
	b, _ := loopwarden.ToolCallEvent("go-b", "read", nil, loopwarden.WithSeq(101))
	verdicts, err := client.Evaluate(ctx, a, b, a)
	if err != nil || len(verdicts) != 3 {
		t.Fatalf("a batch of two runs: %v %v", verdicts, err)
	}
	inspection, err := client.Inspect(ctx, "go-a")
	if err != nil || inspection.EventsEvaluated != 2 {
		t.Fatalf("go-a: want 2 events evaluated (the resent seq 100 is a retry), got %+v %v", inspection, err)
	}
	if _, err := client.Check(ctx, a); err != nil {
		t.Fatal(err)
	}
}
