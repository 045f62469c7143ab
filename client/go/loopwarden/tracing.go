package loopwarden

import (
	"context"
	"strings"

	"google.golang.org/grpc/metadata"

	pb "github.com/loopwarden/loopwarden/client/go/loopwardenv1"
)

// Tracer observes the client's requests and the tools a Guard runs: the hook the OpenTelemetry
// spans in the GenAI guardrail conventions plug into (package otelgenai, the only one that
// imports OpenTelemetry, so a program that does not import it does not link it). Pass it with
// WithTracer; nil means no tracing.
type Tracer interface {
	// StartRequest is called before a Check or an Evaluate request is sent; the request runs with
	// the returned context, and the span ends with its verdicts (or error).
	StartRequest(ctx context.Context, request TracedRequest) (context.Context, RequestSpan)
	// StartTool is called before a Guard asks about a tool call; the call (its checks and the tool
	// itself) runs with the returned context, and end is called with fn's error (nil when none).
	StartTool(ctx context.Context, tool TracedTool) (_ context.Context, end func(error))
}

// RequestSpan is one request's span (Tracer.StartRequest).
type RequestSpan interface {
	// Headers is the span's trace context (traceparent, …), sent with a Check.
	Headers() map[string]string
	// End records the request's verdicts, one per event in order, or its error.
	End(verdicts []Verdict, err error)
}

// TracedRequest is what a Tracer is told of one request.
type TracedRequest struct {
	Target string        // the daemon's gRPC target, as passed to New
	Method string        // "Check" or "Evaluate"
	Events []TracedEvent // the request's events, in order
}

// TracedEvent is one event of a request: its run, agent, kind as the contract spells it
// ("tool_call", "tool_outcome", "user_turn", …), and its tool and tool call when it has them.
type TracedEvent struct {
	RunID      string // trimmed
	AgentID    string // "" when the event names none
	Kind       string // "tool_call", "tool_outcome", "user_turn", "usage", "approval", "run_end", "compaction_retry"
	ToolName   string // as the event spelled it; "" for kinds without a tool
	ToolCallID string // "" when the event carries none
}

// TracedTool is one tool call a Guard runs.
type TracedTool struct {
	RunID      string // the guard's run
	ToolName   string // as the guard was asked to call it
	ToolCallID string // WithToolCallID of the call; "" when none
}

// WithTracer makes the client report its requests (and its guards' tools) to t; see Tracer.
func WithTracer(t Tracer) Option { return clientOption(func(c *Client) { c.tracer = t }) }

func tracedEvents(messages []*pb.Event) []TracedEvent {
	traced := make([]TracedEvent, len(messages))
	for i, m := range messages {
		e := TracedEvent{RunID: strings.TrimSpace(m.GetRunId()), AgentID: m.GetAgentId()}
		switch {
		case m.GetToolCall() != nil:
			e.Kind, e.ToolName, e.ToolCallID = "tool_call", m.GetToolCall().GetToolName(), m.GetToolCall().GetToolCallId()
		case m.GetToolOutcome() != nil:
			e.Kind, e.ToolName, e.ToolCallID = "tool_outcome", m.GetToolOutcome().GetToolName(), m.GetToolOutcome().GetToolCallId()
		case m.GetApproval() != nil:
			e.Kind, e.ToolCallID = "approval", m.GetApproval().GetToolCallId()
		case m.GetCompactionRetry() != nil:
			e.Kind = "compaction_retry"
		case m.GetRunEnd() != nil:
			e.Kind = "run_end"
		case m.GetUserTurn() != nil:
			e.Kind = "user_turn"
		case m.GetUsage() != nil:
			e.Kind = "usage"
		}
		traced[i] = e
	}
	return traced
}

// traced runs one request inside the tracer's span (when there is a tracer).
func (c *Client) traced(ctx context.Context, method string, messages []*pb.Event,
	send func(ctx context.Context, headers map[string]string) ([]Verdict, error)) ([]Verdict, error) {
	if c.tracer == nil {
		return send(ctx, nil)
	}
	ctx, span := c.tracer.StartRequest(ctx, TracedRequest{Target: c.target, Method: method, Events: tracedEvents(messages)})
	verdicts, err := send(ctx, span.Headers())
	span.End(verdicts, err)
	return verdicts, err
}

// withHeaders adds the trace context to a unary call's outgoing metadata, in place of the caller's.
func withHeaders(ctx context.Context, headers map[string]string) context.Context {
	if len(headers) == 0 {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	for key, value := range headers {
		md.Set(key, value)
	}
	return metadata.NewOutgoingContext(ctx, md)
}
