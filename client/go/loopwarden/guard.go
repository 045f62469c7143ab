package loopwarden

import (
	"context"
	"errors"
	"fmt"
	"log"
	"reflect"
)

// BlockedToolResult is what the model sees instead of running a blocked call (spec section 6).
// It marshals to {"content":[{"type":"text","text":…}],"details":{"status":"blocked",…}}.
type BlockedToolResult struct {
	// Content is one text block: the verdict's message.
	Content []TextContent `json:"content"`
	// Details says why the call did not run.
	Details BlockedDetails `json:"details"`
}

// TextContent is one text block of a tool result.
type TextContent struct {
	// Type is "text".
	Type string `json:"type"`
	// Text is the block's text.
	Text string `json:"text"`
}

// BlockedDetails says why the call did not run.
type BlockedDetails struct {
	// Status is "blocked".
	Status string `json:"status"`
	// DeniedReason is "tool-loop".
	DeniedReason string `json:"deniedReason"`
	// Detector is the verdict's detector.
	Detector string `json:"detector"`
	// Count is the verdict's count.
	Count uint32 `json:"count"`
}

// NewBlockedToolResult builds the blocked result for a BLOCK verdict.
func NewBlockedToolResult(v Verdict) BlockedToolResult {
	return BlockedToolResult{
		Content: []TextContent{{Type: "text", Text: v.Message}},
		Details: BlockedDetails{Status: "blocked", DeniedReason: "tool-loop", Detector: v.Detector, Count: v.Count},
	}
}

// Guard turns the verdicts of one run into what a runner does, with the semantics of the Python
// ToolGuard: ask first; BLOCK returns a BlockedToolResult instead of running (and reports it as
// the outcome); ABORT returns a *RunAbortedError; WARN calls the warning handler and runs the
// tool; the result or error is reported after.
type Guard struct {
	client    *Client
	runID     string
	agentID   string
	onWarning func(Verdict)
	failOpen  bool
}

// NewGuard guards the tool calls of one run (WithAgentID, WithWarningHandler, WithFailOpen).
func NewGuard(client *Client, runID string, opts ...GuardOption) *Guard {
	g := &Guard{client: client, runID: runID, failOpen: true, onWarning: func(v Verdict) {
		if v.Announce {
			log.Printf("loopwarden: %s", v.Message)
		}
	}}
	for _, opt := range opts {
		opt.applyToGuard(g)
	}
	return g
}

// Call runs one tool call through the guard. The result is fn's, or a BlockedToolResult; opts
// apply to the call's events (a WithAgentID here wins over the guard's).
func (g *Guard) Call(ctx context.Context, toolName string, params any, fn func(context.Context) (any, error),
	opts ...EventOption) (any, error) {
	if params == nil || (reflect.ValueOf(params).Kind() == reflect.Map && reflect.ValueOf(params).IsNil()) {
		params = map[string]any{}
	}
	var ids []EventOption // the client's agent id unless the guard names one
	if g.agentID != "" {
		ids = append(ids, WithAgentID(g.agentID))
	}
	ids = append(ids, opts...)
	verdict, err := g.client.ToolCall(ctx, g.runID, toolName, params, ids...)
	if err != nil {
		if !errors.Is(err, ErrUnavailable) || !g.failOpen {
			return nil, err
		}
		log.Printf("loopwarden unavailable, running %s unguarded: %v", toolName, err)
		return fn(ctx)
	}
	switch verdict.Action {
	case ActionAbort:
		return nil, &RunAbortedError{verdict}
	case ActionBlock:
		blocked := NewBlockedToolResult(verdict)
		if _, err := g.client.ToolOutcome(ctx, g.runID, toolName, params, append(ids, WithResult(blocked))...); err != nil {
			return nil, err
		}
		return blocked, nil
	case ActionWarn:
		g.onWarning(verdict)
	}
	result, err := fn(ctx)
	if err != nil {
		if _, reportErr := g.client.ToolOutcome(ctx, g.runID, toolName, params,
			append(ids, WithError(fmt.Sprintf("%T: %v", err, err)))...); reportErr != nil {
			return nil, errors.Join(err, reportErr)
		}
		return nil, err
	}
	after, err := g.client.ToolOutcome(ctx, g.runID, toolName, params, append(ids, WithResult(result))...)
	if err != nil {
		return nil, err
	}
	if after.Action == ActionAbort {
		return nil, &RunAbortedError{after}
	}
	return result, nil
}

// GuardTool wraps a typed tool function so every call goes through g.Call.
func GuardTool[P any](g *Guard, toolName string, fn func(context.Context, P) (any, error)) func(context.Context, P) (any, error) {
	return func(ctx context.Context, params P) (any, error) {
		return g.Call(ctx, toolName, params, func(ctx context.Context) (any, error) { return fn(ctx, params) })
	}
}
