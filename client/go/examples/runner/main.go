// Command runner is an agent runner in miniature: every tool goes through a loopwarden Guard, so
// a loop gets a warning, then a blocked tool result instead of another identical call.
//
//	loopwarden serve --config daemon.json5   # with tools.loopDetection.enabled: true
//	LOOPWARDEN_TARGET=127.0.0.1:50051 go run ./examples/runner
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
)

type readParams struct {
	Path string `json:"path"`
}

func main() {
	target := os.Getenv("LOOPWARDEN_TARGET")
	if target == "" {
		target = loopwarden.DefaultTarget
	}
	client, err := loopwarden.New(target, loopwarden.WithAgentID("example"))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	runID := fmt.Sprintf("example-%d-%d", os.Getpid(), time.Now().UnixNano())
	defer client.RunEnd(ctx, runID)

	guard := loopwarden.NewGuard(client, runID, loopwarden.WithWarningHandler(func(v loopwarden.Verdict) {
		fmt.Printf("warning (%s, %d): %s\n", v.Detector, v.Count, v.Message)
	}))
	// A tool the "model" keeps calling with the same arguments, always getting the same answer.
	readFile := loopwarden.GuardTool(guard, "read", func(_ context.Context, p readParams) (any, error) {
		return map[string]any{"content": []map[string]string{{"type": "text", "text": "contents of " + p.Path}}}, nil
	})

	for turn := 1; turn <= 40; turn++ {
		result, err := readFile(ctx, readParams{Path: "/etc/hosts"})
		var aborted *loopwarden.RunAbortedError
		if errors.As(err, &aborted) {
			fmt.Printf("run aborted: %s\n", aborted.Verdict.Message)
			return
		} else if err != nil {
			log.Fatal(err)
		}
		if blocked, ok := result.(loopwarden.BlockedToolResult); ok {
			fmt.Printf("turn %d: blocked by %s after %d repeats\n", turn, blocked.Details.Detector, blocked.Details.Count)
			fmt.Printf("the model sees: %s\n", blocked.Content[0].Text)
			return
		}
		fmt.Printf("turn %d: ran read\n", turn)
	}
}
