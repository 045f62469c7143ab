// Package otelgenai reports a loopwarden Client's requests as OpenTelemetry spans in the GenAI
// guardrail conventions, the Python client's loopwarden.tracing in Go: the conventions pinned at
// open-telemetry/semantic-conventions-genai@f5e3733b19bdb5cb9074c2ec26da9e375d52a40a
// (docs/gen-ai/gen-ai-guardrails.md), emitted only when OTEL_SEMCONV_STABILITY_OPT_IN includes
// gen_ai_latest_experimental, with the same mapping of a verdict (docs/operations.md, "Traces in
// the GenAI conventions"):
//
//	client, err := loopwarden.New(target, loopwarden.WithTracer(otelgenai.New()))
//
// One `apply_guardrail loopwarden` CLIENT span per Check or Evaluate request (a child of the
// context's span), its result on the span for a request of one event and a
// `gen_ai.guardrail.result` event per verdict other than a plain ALLOW; a Check carries the span's
// trace context; a Guard's tool call is an `execute_tool {tool}` span holding its guardrail spans.
//
// This package is the only one of the client that imports OpenTelemetry.
package otelgenai

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
)

// ConventionsCommit is the commit of open-telemetry/semantic-conventions-genai followed here.
const ConventionsCommit = "f5e3733b19bdb5cb9074c2ec26da9e375d52a40a"

const (
	// OptInVariable lists the opted-in conventions (comma-separated); OptInValue turns these spans on.
	OptInVariable = "OTEL_SEMCONV_STABILITY_OPT_IN"
	OptInValue    = "gen_ai_latest_experimental"
	// GuardrailResultEvent is the span event of one verdict; GuardrailSpan the CLIENT span's name.
	GuardrailResultEvent = "gen_ai.guardrail.result"
	GuardrailSpan        = "apply_guardrail " + component
	component            = "loopwarden"
	scope                = "loopwarden.client"
)

// OptedIn says whether value (OTEL_SEMCONV_STABILITY_OPT_IN's) names gen_ai_latest_experimental.
func OptedIn(value string) bool {
	for _, item := range strings.Split(value, ",") {
		if strings.EqualFold(strings.TrimSpace(item), OptInValue) {
			return true
		}
	}
	return false
}

// Option configures New.
type Option func(*tracer)

// WithTracerProvider sets the provider of the spans (default: otel.GetTracerProvider()).
func WithTracerProvider(provider trace.TracerProvider) Option {
	return func(t *tracer) { t.provider = provider }
}

// WithPropagator sets how a Check carries the span's trace context (default: otel.GetTextMapPropagator()).
func WithPropagator(propagator propagation.TextMapPropagator) Option {
	return func(t *tracer) { t.propagator = propagator }
}

// New is the Tracer to pass to loopwarden.WithTracer, or nil (no tracing) when
// OTEL_SEMCONV_STABILITY_OPT_IN does not include gen_ai_latest_experimental.
func New(opts ...Option) loopwarden.Tracer {
	if !OptedIn(os.Getenv(OptInVariable)) {
		return nil
	}
	t := &tracer{}
	for _, opt := range opts {
		opt(t)
	}
	if t.provider == nil {
		t.provider = otel.GetTracerProvider()
	}
	if t.propagator == nil {
		t.propagator = otel.GetTextMapPropagator()
	}
	t.tracer = t.provider.Tracer(scope)
	return t
}

type tracer struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
	tracer     trace.Tracer
}

func (t *tracer) StartRequest(ctx context.Context, request loopwarden.TracedRequest) (context.Context, loopwarden.RequestSpan) {
	attributes := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "apply_guardrail"),
		attribute.String("gen_ai.provider.name", component),
		attribute.String("gen_ai.guardrail.component.name", component),
	}
	attributes = append(attributes, server(request.Target)...)
	attributes = append(attributes, requestAttributes(request.Events)...)
	ctx, span := t.tracer.Start(ctx, GuardrailSpan, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attributes...))
	headers := propagation.MapCarrier{}
	t.propagator.Inject(ctx, headers)
	return ctx, &requestSpan{span: span, events: request.Events, headers: headers}
}

func (t *tracer) StartTool(ctx context.Context, tool loopwarden.TracedTool) (context.Context, func(error)) {
	attributes := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", tool.ToolName),
		attribute.String("gen_ai.conversation.id", tool.RunID),
	}
	if tool.ToolCallID != "" {
		attributes = append(attributes, attribute.String("gen_ai.tool.call.id", tool.ToolCallID))
	}
	ctx, span := t.tracer.Start(ctx, "execute_tool "+tool.ToolName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attributes...))
	return ctx, func(err error) {
		failed(span, err)
		span.End()
	}
}

type requestSpan struct {
	span    trace.Span
	events  []loopwarden.TracedEvent
	headers propagation.MapCarrier
}

func (s *requestSpan) Headers() map[string]string { return s.headers }

func (s *requestSpan) End(verdicts []loopwarden.Verdict, err error) {
	defer s.span.End()
	if err != nil {
		failed(s.span, err)
		return
	}
	if !s.span.IsRecording() {
		return
	}
	if len(verdicts) == 1 {
		s.span.SetAttributes(attribute.String("gen_ai.guardrail.result.type", "action"),
			attribute.String("gen_ai.guardrail.result.value", string(verdicts[0].Action)))
		if verdicts[0].ErrorCode != "" {
			s.span.SetAttributes(attribute.String("gen_ai.guardrail.result.reason", verdicts[0].ErrorCode))
		}
	}
	for i, verdict := range verdicts {
		if i < len(s.events) && (verdict.Action != loopwarden.ActionAllow || verdict.DecisionID != "") {
			s.span.AddEvent(GuardrailResultEvent, trace.WithAttributes(ResultAttributes(s.events[i], verdict)...))
		}
	}
}

// ResultAttributes are a gen_ai.guardrail.result event's attributes for one verdict and its event.
func ResultAttributes(event loopwarden.TracedEvent, verdict loopwarden.Verdict) []attribute.KeyValue {
	runID := verdict.RunID
	if runID == "" {
		runID = event.RunID
	}
	toolName := verdict.ToolName
	if toolName == "" {
		toolName = event.ToolName
	}
	attributes := []attribute.KeyValue{
		attribute.String("gen_ai.guardrail.component.name", component),
		attribute.String("gen_ai.provider.name", component),
		attribute.String("gen_ai.guardrail.result.type", "action"),
		attribute.String("gen_ai.guardrail.result.value", string(verdict.Action)),
		attribute.String("gen_ai.conversation.id", runID),
	}
	attributes = appendSet(attributes,
		"gen_ai.guardrail.policy.rule.id", verdict.Detector, "gen_ai.guardrail.policy.id", event.AgentID,
		"gen_ai.guardrail.source", event.Kind, "gen_ai.guardrail.result.reason", verdict.ErrorCode,
		"gen_ai.tool.name", toolName, "gen_ai.tool.call.id", event.ToolCallID,
		"loopwarden.decision_id", verdict.DecisionID)
	attributes = append(attributes, attribute.Int64("loopwarden.seq", int64(verdict.Seq)),
		attribute.Int64("loopwarden.count", int64(verdict.Count)))
	if verdict.ShadowAction != "" {
		attributes = append(attributes, attribute.String("loopwarden.shadow_action", string(verdict.ShadowAction)))
	}
	return attributes
}

// appendSet appends the (key, value) pairs whose value is not empty.
func appendSet(attributes []attribute.KeyValue, pairs ...string) []attribute.KeyValue {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			attributes = append(attributes, attribute.String(pairs[i], pairs[i+1]))
		}
	}
	return attributes
}

// requestAttributes: what a request's events share (one run), and one event's tool, call, source and policy.
func requestAttributes(events []loopwarden.TracedEvent) []attribute.KeyValue {
	var attributes []attribute.KeyValue
	runs := map[string]bool{}
	for _, e := range events {
		runs[e.RunID] = true
	}
	if len(runs) == 1 && !runs[""] {
		attributes = append(attributes, attribute.String("gen_ai.conversation.id", events[0].RunID))
	}
	if len(events) == 1 {
		e := events[0]
		attributes = appendSet(attributes, "gen_ai.guardrail.source", e.Kind, "gen_ai.guardrail.policy.id", e.AgentID,
			"gen_ai.tool.name", e.ToolName, "gen_ai.tool.call.id", e.ToolCallID)
	}
	return attributes
}

// server is server.address / server.port of a gRPC target.
func server(target string) []attribute.KeyValue {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return []attribute.KeyValue{attribute.String("server.address", target[strings.Index(target, ":")+1:])}
	}
	if i := strings.LastIndex(target, "///"); i >= 0 {
		target = target[i+3:]
	}
	host, port, err := net.SplitHostPort(target)
	if number, convErr := strconv.Atoi(port); err == nil && convErr == nil && host != "" {
		return []attribute.KeyValue{attribute.String("server.address", host), attribute.Int("server.port", number)}
	}
	if target == "" {
		return nil
	}
	return []attribute.KeyValue{attribute.String("server.address", target)}
}

func failed(span trace.Span, err error) {
	if err == nil {
		return
	}
	span.SetAttributes(attribute.String("error.type", errorType(err)))
	message := err.Error()
	if len(message) > 200 {
		message = message[:200]
	}
	span.SetStatus(codes.Error, message)
}

// errorType is a low-cardinality name for err: its Go type (`loopwarden.unavailable`, `*fs.PathError`
// without the star).
func errorType(err error) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
}
