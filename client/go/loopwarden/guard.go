package loopwarden

import (
	"context"
	"errors"
	"fmt"
	"log"
	"reflect"
	"time"
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

// AskAnswer is what an ask handler (WithAskHandler) answers for an ActionAsk verdict.
type AskAnswer string

// The answers to an ASK.
const (
	// AskDeny does not run the call; the pattern's later criticals block. The zero answer denies.
	AskDeny AskAnswer = ""
	// AskOnce runs this call; the pattern's next critical asks again.
	AskOnce AskAnswer = "once"
	// AskAlways runs it, and lets the daemon keep a standing exemption for this agent, tool and
	// arguments.
	AskAlways AskAnswer = "always"
)

// Guard turns the verdicts of one run into what a runner does, with the semantics of the Python
// ToolGuard: ask first; BLOCK returns a BlockedToolResult instead of running (and reports it as
// the outcome); ABORT returns a *RunAbortedError; WARN calls the warning handler and runs the
// tool; the result or error is reported after, with how long the tool ran. With an ask handler
// (WithAskHandler) an ASK is put to a human and their answer reported as an approval; without
// one an ASK (or any action this client does not know) is a BLOCK. Child makes the guard of a
// sub-agent's run.
type Guard struct {
	client      *Client
	runID       string
	agentID     string
	parentRunID string
	rootRunID   string
	onWarning   func(Verdict)
	onAsk       func(context.Context, Verdict) AskAnswer
	failOpen    bool
}

// NewGuard guards the tool calls of one run (WithAgentID, WithWarningHandler, WithAskHandler,
// WithFailOpen, WithParentRunID, WithRootRunID).
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

// RunID is the guarded run.
func (g *Guard) RunID() string { return g.runID }

// Child is a guard for a child run (a sub-agent) of this run, with this guard's handlers: its
// events name this run as their parent and are routed by this tree's root; it keeps its own
// history, shares the tree's budgets, and its stop is told to this run's next call (WARN
// child_stopped). opts apply after the inherited settings (WithAgentID for the sub-agent's own).
func (g *Guard) Child(runID string, opts ...GuardOption) *Guard {
	child := *g
	child.runID, child.parentRunID = runID, g.runID
	if g.rootRunID == "" {
		child.rootRunID = g.runID
	}
	for _, opt := range opts {
		opt.applyToGuard(&child)
	}
	return &child
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
	// accepts_ask only with a handler: a guard that cannot ask gets the BLOCK it would get without.
	ids = append(ids, WithParentRunID(g.parentRunID), WithRootRunID(g.rootRunID), WithAcceptsAsk(g.onAsk != nil))
	ids = append(ids, opts...)
	if tracer := g.client.tracer; tracer != nil {
		ctx, end := tracer.StartTool(ctx, TracedTool{RunID: g.runID, ToolName: toolName, ToolCallID: fields(ids).toolCallID})
		result, err := g.call(ctx, toolName, params, fn, ids)
		end(err)
		return result, err
	}
	return g.call(ctx, toolName, params, fn, ids)
}

// call is Call once the events' options are set (inside the tracer's tool span, when there is one).
func (g *Guard) call(ctx context.Context, toolName string, params any, fn func(context.Context) (any, error),
	ids []EventOption) (any, error) {
	verdict, err := g.client.ToolCall(ctx, g.runID, toolName, params, ids...)
	if err != nil {
		if !errors.Is(err, ErrUnavailable) || !g.failOpen {
			return nil, err
		}
		log.Printf("loopwarden unavailable, running %s unguarded: %v", toolName, err)
		return fn(ctx)
	}
	if verdict.Action == ActionAsk && g.onAsk != nil {
		if verdict, err = g.ask(ctx, verdict, ids); err != nil {
			return nil, err
		}
	}
	switch verdict.Action {
	case ActionAbort:
		return nil, &RunAbortedError{verdict}
	case ActionBlock, ActionAsk:
		blocked := NewBlockedToolResult(verdict)
		if _, err := g.client.ToolOutcome(ctx, g.runID, toolName, params, append(ids, WithResult(blocked))...); err != nil {
			return nil, err
		}
		return blocked, nil
	case ActionWarn:
		g.onWarning(verdict)
	}
	started := time.Now()
	result, err := fn(ctx)
	ids = append(ids, WithDuration(time.Since(started)))
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

// ask puts an ASK to the handler and reports the answer; the verdict to act on: the ASK itself
// (handled as a BLOCK) when denied, an ALLOW when approved, the approval's own verdict when the
// daemon aborted the run.
func (g *Guard) ask(ctx context.Context, verdict Verdict, ids []EventOption) (Verdict, error) {
	answer := g.onAsk(ctx, verdict)
	if answer != AskDeny && answer != AskOnce && answer != AskAlways {
		return Verdict{}, fmt.Errorf("loopwarden: an ask handler answers AskDeny, AskOnce or AskAlways, got %q", answer)
	}
	approval := Approval{ToolCallID: fields(ids).toolCallID, Approved: answer != AskDeny, Scope: ScopeOnce}
	if answer == AskAlways {
		approval.Scope = ScopeAlways
	}
	if approval.ToolCallID == "" {
		approval.DecisionID = verdict.DecisionID
	}
	if approval.ToolCallID == "" && approval.DecisionID == "" {
		return verdict, nil // nothing names the call to answer: the ASK stands, as a BLOCK
	}
	answered, err := g.client.Approval(ctx, g.runID, approval, ids...)
	if err != nil {
		return Verdict{}, err
	}
	if answered.Action == ActionAbort {
		return answered, nil
	}
	if approval.Approved {
		verdict.Action = ActionAllow
	}
	return verdict, nil
}

// GuardTool wraps a typed tool function so every call goes through g.Call.
func GuardTool[P any](g *Guard, toolName string, fn func(context.Context, P) (any, error)) func(context.Context, P) (any, error) {
	return func(ctx context.Context, params P) (any, error) {
		return g.Call(ctx, toolName, params, func(ctx context.Context) (any, error) { return fn(ctx, params) })
	}
}
