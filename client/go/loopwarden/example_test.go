package loopwarden_test

// Examples for go doc. They need a daemon, so they have no Output line: go test compiles them
// (the API they show cannot drift) but does not run them.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
)

func ExampleNewGuard() {
	client, err := loopwarden.New(loopwarden.DefaultTarget, loopwarden.WithAgentID("coder"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	defer client.RunEnd(ctx, "run-42")

	type readParams struct {
		Path string `json:"path"`
	}
	guard := loopwarden.NewGuard(client, "run-42", loopwarden.WithWarningHandler(func(v loopwarden.Verdict) {
		log.Printf("loop warning from %s: %s", v.Detector, v.Message)
	}))
	read := loopwarden.GuardTool(guard, "read", func(_ context.Context, p readParams) (any, error) {
		data, err := os.ReadFile(p.Path)
		return string(data), err
	})
	result, err := read(ctx, readParams{Path: "/etc/hosts"})
	var aborted *loopwarden.RunAbortedError
	switch {
	case errors.As(err, &aborted):
		log.Fatalf("run aborted: %s", aborted.Verdict.Message)
	case err != nil:
		log.Fatal(err)
	}
	if blocked, ok := result.(loopwarden.BlockedToolResult); ok {
		fmt.Println("the model sees:", blocked.Content[0].Text)
	}
}

func ExampleClient_ToolCall() {
	client, err := loopwarden.New(loopwarden.DefaultTarget, loopwarden.WithToken("s3cret"),
		loopwarden.WithTimeout(2*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	params := map[string]any{"path": "/etc/hosts"}
	verdict, err := client.ToolCall(ctx, "run-42", "read", params, loopwarden.WithToolCallID("call-1"))
	if err != nil {
		log.Fatal(err)
	}
	if verdict.MayRun() {
		_, err := client.ToolOutcome(ctx, "run-42", "read", params, loopwarden.WithToolCallID("call-1"),
			loopwarden.WithResult("127.0.0.1 localhost"))
		if err != nil {
			log.Fatal(err)
		}
	}
}

func ExampleClient_Evaluate() {
	client, err := loopwarden.New(loopwarden.DefaultTarget)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	// Two parallel tool calls of one turn, in one request; the builders neither number the
	// events nor add the client's agent id.
	var events []loopwarden.Event
	for i, path := range []string{"/a", "/b"} {
		event, err := loopwarden.ToolCallEvent("run-42", "read", map[string]any{"path": path},
			loopwarden.WithSeq(uint64(i+1)), loopwarden.WithAgentID("coder"))
		if err != nil {
			log.Fatal(err)
		}
		events = append(events, event)
	}
	verdicts, err := client.Evaluate(context.Background(), events...)
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range verdicts {
		fmt.Println(v.Seq, v.Action)
	}
}

func ExampleClient_Inspect() {
	client, err := loopwarden.New(loopwarden.DefaultTarget)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	inspection, err := client.Inspect(context.Background(), "run-42")
	if errors.Is(err, loopwarden.ErrRunNotFound) {
		fmt.Println("the daemon holds no state for run-42")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(inspection.Records), "records,", inspection.Blocks, "blocks, history size",
		inspection.EffectiveConfig.HistorySize)
}
