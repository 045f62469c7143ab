package loopwarden_test

// Every conformance scenario (tests/conformance/scenarios) through the real daemon, over a real
// Evaluate stream held by the Go client, with the assertions of the Python runner.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
)

// The scenarios the Python suite also sends through the unary Check RPC.
var checkScenarios = map[string]bool{"ex07_generic_block": true, "ex13_unknown_tool": true,
	"ex17_guard_abort": true, "ex23_reject_bad_events": true}

// guardConfig is the daemon config of the client and guard tests.
var guardConfig = map[string]any{"tools": map[string]any{"loopDetection": map[string]any{"enabled": true}}}

var variants []variant

func TestMain(m *testing.M) {
	var err error
	if variants, err = loadVariants(); err != nil {
		fmt.Fprintln(os.Stderr, "loading scenarios:", err)
		os.Exit(1)
	}
	configs := []any{guardConfig, fastConfig}
	for _, v := range variants {
		configs = append(configs, v.Config)
	}
	// A daemon that does not start fails every test that needs one (daemonFor), not the tests
	// that need none: the API and go.mod checks still report.
	if daemonsErr = startDaemons(configs); daemonsErr != nil {
		fmt.Fprintln(os.Stderr, daemonsErr)
	}
	code := m.Run()
	stopDaemons()
	os.Exit(code)
}

// protoNames is a client verdict in the shape the expectations use (proto enum names).
func protoNames(v loopwarden.Verdict) map[string]any {
	upper := func(prefix, s string) string {
		if s == "" {
			return prefix + "UNSPECIFIED"
		}
		return prefix + strings.ToUpper(s)
	}
	return map[string]any{
		"seq": json.Number(strconv.FormatUint(v.Seq, 10)), "run_id": v.RunID,
		"action": upper("ACTION_", string(v.Action)), "detector": upper("DETECTOR_", v.Detector),
		"level": upper("LEVEL_", v.Level), "count": json.Number(strconv.FormatUint(uint64(v.Count), 10)),
		"message": v.Message, "warning_key": v.WarningKey, "announce": v.Announce,
		"paired_tool_name": v.PairedToolName, "error_code": v.ErrorCode, "tool_name": v.ToolName,
	}
}

func equal(wanted, got any) bool {
	w, wok := wanted.(json.Number)
	g, gok := got.(json.Number)
	if wok && gok {
		wf, err1 := w.Float64()
		gf, err2 := g.Float64()
		return err1 == nil && err2 == nil && wf == gf
	}
	return reflect.DeepEqual(wanted, got)
}

// levelWords: the word every WARN / BLOCK / ABORT message starts with, whatever the expectation.
var levelWords = map[string]string{"ACTION_WARN": "WARNING:", "ACTION_BLOCK": "CRITICAL:", "ACTION_ABORT": "CRITICAL:"}

// check asserts a verdict meets an expectation: the rules of tests/conformance/scenarios.py.
func check(t *testing.T, expect map[string]any, verdict map[string]any, where string) {
	t.Helper()
	if word, ok := levelWords[verdict["action"].(string)]; ok && !strings.HasPrefix(verdict["message"].(string), word) {
		t.Fatalf("%s: a %v message must start with %q: %q", where, verdict["action"], word, verdict["message"])
	}
	if expect == nil {
		return
	}
	for key, wanted := range expect {
		switch key {
		case "action_in":
			found := false
			for _, action := range wanted.([]any) {
				found = found || action == verdict["action"]
			}
			if !found {
				t.Fatalf("%s: action %v not in %v", where, verdict["action"], wanted)
			}
		case "message_contains":
			phrases, isList := wanted.([]any)
			if !isList {
				phrases = []any{wanted}
			}
			for _, phrase := range phrases {
				if !strings.Contains(verdict["message"].(string), phrase.(string)) {
					t.Fatalf("%s: %q not in message %q", where, phrase, verdict["message"])
				}
			}
		default:
			got, ok := verdict[key]
			if !ok {
				t.Fatalf("%s: unknown expectation key %q", where, key)
			}
			if !equal(wanted, got) {
				t.Fatalf("%s: %s expected %v, got %v (%v)", where, key, wanted, got, verdict)
			}
		}
	}
	if _, hasDetector := expect["detector"]; expect["action"] == "ACTION_ALLOW" && !hasDetector &&
		verdict["detector"] != "DETECTOR_UNSPECIFIED" {
		t.Fatalf("%s: plain allow with a detector: %v", where, verdict)
	}
}

func newClient(t *testing.T, config any) *loopwarden.Client {
	t.Helper()
	client, err := loopwarden.New(daemonFor(t, config).target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestScenarioDataIsThere(t *testing.T) {
	if len(variants) < 20 {
		t.Fatalf("only %d variants found in %s", len(variants), scenarioDir())
	}
}

func TestConformanceOverEvaluateStream(t *testing.T) {
	for _, v := range variants {
		t.Run(v.ID(), func(t *testing.T) {
			ctx := testContext(t)
			client := newClient(t, v.Config)
			events, err := expand(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, event := range events {
				sent, err := event.build(event.runID)
				if err != nil {
					t.Fatal(err)
				}
				verdicts, err := client.Evaluate(ctx, sent)
				if err != nil {
					t.Fatal(err)
				}
				verdict := protoNames(verdicts[0])
				where := fmt.Sprintf("%s seq %d", v.ID(), event.seq)
				if got, want := verdicts[0].Seq, event.seq; got != want {
					t.Fatalf("%s: seq echoed as %d", where, got)
				}
				if got, want := verdicts[0].RunID, strings.TrimSpace(event.runID); got != want {
					t.Fatalf("%s: run id echoed as %q, want %q", where, got, want)
				}
				check(t, event.expect, verdict, where)
			}
		})
	}
}

func TestConformanceOverUnaryCheck(t *testing.T) {
	for _, v := range variants {
		if !checkScenarios[v.Scenario] {
			continue
		}
		t.Run(v.ID(), func(t *testing.T) {
			ctx := testContext(t)
			client := newClient(t, v.Config)
			events, err := expand(v)
			if err != nil {
				t.Fatal(err)
			}
			for _, event := range events {
				sent, err := event.build(strings.Replace(event.runID, v.ID(), v.ID()+"/check", 1))
				if err != nil {
					t.Fatal(err)
				}
				verdict, err := client.Check(ctx, sent)
				if err != nil {
					t.Fatal(err)
				}
				check(t, event.expect, protoNames(verdict), fmt.Sprintf("check %s seq %d", v.ID(), event.seq))
			}
		})
	}
}
