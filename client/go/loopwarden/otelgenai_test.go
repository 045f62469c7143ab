package loopwarden_test

// Guardrail spans in the OpenTelemetry GenAI conventions (package otelgenai) against the real
// daemon, kept by the SDK's in-memory exporter: the Python client's test
// (tests/e2e/test_tracing_genai.py) in Go.

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
	"github.com/loopwarden/loopwarden/client/go/loopwarden/otelgenai"
)

func tracedClient(t *testing.T, exporter *tracetest.InMemoryExporter) *loopwarden.Client {
	t.Helper()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	tracer := otelgenai.New(otelgenai.WithTracerProvider(provider), otelgenai.WithPropagator(propagation.TraceContext{}))
	client, err := loopwarden.New(daemonFor(t, guardConfig).target, loopwarden.WithTracer(tracer))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func guardedLoop(t *testing.T, client *loopwarden.Client, runID string) []any {
	t.Helper()
	guard := loopwarden.NewGuard(client, runID, loopwarden.WithAgentID("go-agent"))
	var results []any
	for i := 1; i <= 21; i++ {
		result, err := guard.Call(testContext(t), "read", map[string]any{"path": "/x"},
			func(context.Context) (any, error) { return same, nil }, loopwarden.WithToolCallID(fmt.Sprintf("call-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, result)
	}
	return results
}

func attributeMap(span tracetest.SpanStub) map[string]any {
	out := map[string]any{}
	for _, kv := range span.Attributes {
		out[string(kv.Key)] = kv.Value.AsInterface()
	}
	return out
}

func TestGuardrailSpansOfALoop(t *testing.T) {
	t.Setenv(otelgenai.OptInVariable, "gen_ai_latest_experimental")
	exporter := tracetest.NewInMemoryExporter()
	results := guardedLoop(t, tracedClient(t, exporter), "otel/loop")
	if _, blocked := results[20].(loopwarden.BlockedToolResult); !blocked {
		t.Fatalf("the 21st call was not blocked: %#v", results[20])
	}
	spans := exporter.GetSpans()
	var tools []tracetest.SpanStub
	for _, span := range spans {
		if span.Name == "execute_tool read" {
			tools = append(tools, span)
		}
	}
	if len(tools) != 21 {
		t.Fatalf("%d execute_tool spans, want 21", len(tools))
	}
	var values, reported []string
	for i, tool := range tools {
		if got := attributeMap(tool)["gen_ai.tool.call.id"]; got != fmt.Sprintf("call-%d", i+1) || tool.SpanKind != trace.SpanKindInternal {
			t.Fatalf("tool span %d: %v %v", i, got, tool.SpanKind)
		}
		var children []tracetest.SpanStub
		for _, span := range spans {
			if span.Parent.SpanID() == tool.SpanContext.SpanID() {
				children = append(children, span)
			}
		}
		if len(children) != 2 || children[0].Name != otelgenai.GuardrailSpan || children[0].SpanKind != trace.SpanKindClient ||
			attributeMap(children[0])["gen_ai.guardrail.source"] != "tool_call" ||
			attributeMap(children[1])["gen_ai.guardrail.source"] != "tool_outcome" {
			t.Fatalf("tool span %d: children %v", i, children)
		}
		call := attributeMap(children[0])
		values = append(values, call["gen_ai.guardrail.result.value"].(string))
		for _, event := range children[0].Events {
			if event.Name != otelgenai.GuardrailResultEvent {
				continue
			}
			got := map[string]any{}
			for _, kv := range event.Attributes {
				got[string(kv.Key)] = kv.Value.AsInterface()
			}
			if got["loopwarden.decision_id"] == "" || got["loopwarden.decision_id"] == nil {
				t.Fatalf("call %d: no decision id: %v", i+1, got)
			}
			delete(got, "loopwarden.decision_id")
			delete(got, "loopwarden.seq")
			want := map[string]any{
				"gen_ai.guardrail.component.name": "loopwarden", "gen_ai.provider.name": "loopwarden",
				"gen_ai.guardrail.result.type": "action", "gen_ai.guardrail.result.value": call["gen_ai.guardrail.result.value"],
				"gen_ai.guardrail.policy.rule.id": "generic_repeat", "gen_ai.guardrail.policy.id": "go-agent",
				"gen_ai.guardrail.source": "tool_call", "gen_ai.tool.name": "read",
				"gen_ai.tool.call.id": fmt.Sprintf("call-%d", i+1), "gen_ai.conversation.id": "otel/loop",
				"loopwarden.count": int64(i),
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("call %d event:\n got %v\nwant %v", i+1, got, want)
			}
			reported = append(reported, fmt.Sprintf("%d:%s", i+1, got["gen_ai.guardrail.result.value"]))
		}
	}
	wantValues := []string{}
	for i := 1; i <= 21; i++ {
		wantValues = append(wantValues, map[bool]string{true: "allow", false: map[bool]string{true: "warn", false: "block"}[i <= 20]}[i <= 10])
	}
	if !reflect.DeepEqual(wantValues, values) {
		t.Fatalf("results %v, want %v", values, wantValues)
	}
	wantReported := []string{"11:warn", "12:warn", "13:warn", "14:warn", "15:warn", "16:warn", "17:warn", "18:warn",
		"19:warn", "20:warn", "21:block"}
	if !reflect.DeepEqual(wantReported, reported) {
		t.Fatalf("result events %v, want %v", reported, wantReported)
	}
}

func TestGuardrailSpanOfACheckCarriesItsTraceContext(t *testing.T) {
	t.Setenv(otelgenai.OptInVariable, "http,gen_ai_latest_experimental")
	exporter := tracetest.NewInMemoryExporter()
	client := tracedClient(t, exporter)
	event, err := loopwarden.ToolCallEvent("otel/check", "read", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Check(testContext(t), event); err != nil {
		t.Fatal(err)
	}
	spans := exporter.GetSpans()
	if len(spans) != 1 || attributeMap(spans[0])["gen_ai.guardrail.result.value"] != "allow" ||
		attributeMap(spans[0])["gen_ai.conversation.id"] != "otel/check" {
		t.Fatalf("spans %v", spans)
	}
	// The headers a Check sends are the span's own W3C trace context.
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	tracer := otelgenai.New(otelgenai.WithTracerProvider(provider), otelgenai.WithPropagator(propagation.TraceContext{}))
	ctx, span := tracer.StartRequest(context.Background(), loopwarden.TracedRequest{Method: "Check"})
	want := fmt.Sprintf("00-%s-%s-01", trace.SpanContextFromContext(ctx).TraceID(), trace.SpanContextFromContext(ctx).SpanID())
	if got := span.Headers()["traceparent"]; got != want {
		t.Fatalf("traceparent %q, want %q", got, want)
	}
	span.End(nil, nil)
}

func TestWithoutTheOptInThereIsNoTracer(t *testing.T) {
	t.Setenv(otelgenai.OptInVariable, "http")
	if tracer := otelgenai.New(); tracer != nil {
		t.Fatalf("a tracer without the opt-in: %v", tracer)
	}
	if !otelgenai.OptedIn(" GEN_AI_LATEST_EXPERIMENTAL") || otelgenai.OptedIn("gen_ai") {
		t.Fatal("OptedIn reads the list wrong")
	}
}
