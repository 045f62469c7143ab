package loopwarden_test

// Test support: the real daemon on loopback (one per config, like tests/support/daemon.py) and
// the conformance scenarios expanded by the rules of tests/conformance/README.md.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopwarden/loopwarden/client/go/loopwarden"
)

// The test binary runs in client/go/loopwarden.
var repoRoot = filepath.Join("..", "..", "..")

const startupTimeout = 30 * time.Second

// ---------------------------------------------------------------------------------- daemon

type daemon struct {
	target string
	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
}

// serveCommand: LOOPWARDEN_SERVE_CMD (a JSON array, set by the pytest wrapper to its own
// interpreter), else the repository's .venv, else PATH.
func serveCommand() ([]string, error) {
	if raw := os.Getenv("LOOPWARDEN_SERVE_CMD"); raw != "" {
		var cmd []string
		if err := json.Unmarshal([]byte(raw), &cmd); err != nil || len(cmd) == 0 {
			return nil, fmt.Errorf("LOOPWARDEN_SERVE_CMD must be a JSON array of strings: %q", raw)
		}
		return cmd, nil
	}
	venv, _ := filepath.Abs(filepath.Join(repoRoot, ".venv", "bin", "loopwarden"))
	if _, err := os.Stat(venv); err == nil {
		return []string{venv}, nil
	}
	return []string{"loopwarden"}, nil
}

func startDaemon(configJSON string, extraArgs ...string) (*daemon, error) {
	dir, err := os.MkdirTemp("", "loopwarden-go-")
	if err != nil {
		return nil, err
	}
	configPath := filepath.Join(dir, "loopwarden.json5")
	if err := os.WriteFile(configPath, []byte(configJSON), 0o600); err != nil {
		return nil, err
	}
	command, err := serveCommand()
	if err != nil {
		return nil, err
	}
	args := append(command[1:], "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--config", configPath)
	args = append(args, extraArgs...)
	cmd := exec.Command(command[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LOOPWARDEN_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %v: %w", command, err)
	}
	d := &daemon{cmd: cmd, dir: dir, exited: make(chan struct{})}
	found := make(chan string, 1)
	var mu sync.Mutex
	var logs []string
	go func() {
		scanner := bufio.NewScanner(stderr)
		scanner.Buffer(make([]byte, 1<<20), 1<<20)
		for scanner.Scan() {
			line := scanner.Text()
			mu.Lock()
			logs = append(logs, line)
			mu.Unlock()
			var record struct {
				Msg         string `json:"msg"`
				GRPCAddress string `json:"grpc_address"`
			}
			if json.Unmarshal([]byte(line), &record) == nil && record.Msg == "listening" {
				select {
				case found <- record.GRPCAddress:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(d.exited)
	}()
	select {
	case d.target = <-found:
		return d, nil
	case <-d.exited:
	case <-time.After(startupTimeout):
		_ = cmd.Process.Kill()
		<-d.exited
	}
	mu.Lock()
	defer mu.Unlock()
	os.RemoveAll(dir)
	return nil, fmt.Errorf("daemon did not start: %s", strings.Join(logs, "\n"))
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	os.RemoveAll(d.dir)
}

// daemons holds one running daemon per distinct config (canonical JSON), started by TestMain;
// daemonsErr says why some did not start.
var (
	daemons    = map[string]*daemon{}
	daemonsErr error
)

func daemonFor(t *testing.T, config any) *daemon {
	t.Helper()
	d, ok := daemons[canonical(config)]
	if !ok {
		if daemonsErr != nil {
			t.Fatalf("no daemon for config %s: the daemons did not all start (errors above the first test)", canonical(config))
		}
		t.Fatalf("no daemon was started for config %s", canonical(config))
	}
	return d
}

func startDaemons(configs []any) error {
	keys := map[string]bool{}
	for _, c := range configs {
		keys[canonical(c)] = true
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := startDaemon(key)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			daemons[key] = d
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func stopDaemons() {
	var wg sync.WaitGroup
	for _, d := range daemons {
		wg.Add(1)
		go func() { defer wg.Done(); d.stop() }()
	}
	wg.Wait()
}

// ---------------------------------------------------------------------------------- scenarios

type variant struct {
	Scenario, Name string
	Config         any
	Steps          []step
}

func (v variant) ID() string { return v.Scenario + "/" + v.Name }

type step struct {
	Repeat int              `json:"repeat"`
	Events []map[string]any `json:"events"`
	Expect []map[string]any `json:"expect"` // a nil entry: nothing asserted
}

// decodeJSON keeps numbers as json.Number, so a value re-encodes exactly as written.
func decodeJSON(data []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(into)
}

// canonical is JSON with object keys sorted at every level (encoding/json sorts map keys).
func canonical(value any) string {
	text, err := encode(value)
	if err != nil {
		panic(err)
	}
	return text
}

func encode(value any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(value); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func scenarioDir() string {
	if dir := os.Getenv("LOOPWARDEN_SCENARIO_DIR"); dir != "" {
		return dir
	}
	return filepath.Join(repoRoot, "tests", "conformance", "scenarios")
}

func loadVariants() ([]variant, error) {
	paths, err := filepath.Glob(filepath.Join(scenarioDir(), "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var variants []variant
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var scenario struct {
			Name     string `json:"name"`
			Config   any    `json:"config"`
			Variants []struct {
				Name  string `json:"name"`
				Steps []step `json:"steps"`
			} `json:"variants"`
		}
		if err := decodeJSON(data, &scenario); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, v := range scenario.Variants {
			variants = append(variants, variant{scenario.Name, v.Name, scenario.Config, v.Steps})
		}
	}
	return variants, nil
}

// fill replaces {i} in every string value (not in keys).
func fill(value any, i int) any {
	switch v := value.(type) {
	case string:
		return strings.ReplaceAll(v, "{i}", strconv.Itoa(i))
	case []any:
		out := make([]any, len(v))
		for k, item := range v {
			out[k] = fill(item, i)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			out[k] = fill(item, i)
		}
		return out
	}
	return value
}

type concreteEvent struct {
	seq    uint64
	runID  string
	expect map[string]any
	// build makes the event through the client's own builders, for runID (the Check test sends
	// each event under a run id of its own).
	build func(runID string) (loopwarden.Event, error)
}

var kinds = []string{"tool_call", "tool_outcome", "compaction_retry", "user_turn", "run_end", "usage", "approval"}

func str(body map[string]any, key string) string {
	s, _ := body[key].(string)
	return s
}

// number reads a JSON number of the data (0 when absent); the data is checked by test_scenario_data.py.
func number(body map[string]any, key string) float64 {
	n, _ := body[key].(json.Number)
	f, _ := n.Float64()
	return f
}

func expand(v variant) ([]concreteEvent, error) {
	var out []concreteEvent
	var seq uint64
	for _, st := range v.Steps {
		if len(st.Events) != len(st.Expect) {
			return nil, fmt.Errorf("%s: a step has %d events and %d expectations", v.ID(), len(st.Events), len(st.Expect))
		}
		repeat := st.Repeat
		if repeat == 0 {
			repeat = 1
		}
		for i := 1; i <= repeat; i++ {
			for index, raw := range st.Events {
				event := fill(raw, i).(map[string]any)
				seq++
				kind := ""
				for _, k := range kinds {
					if _, ok := event[k]; ok {
						kind = k
						break
					}
				}
				body, _ := event[kind].(map[string]any)
				paramsJSON, hasParamsJSON := body["params_json"].(string)
				if !hasParamsJSON {
					paramsJSON = ""
					if params, ok := body["params"]; ok {
						text, err := encode(params)
						if err != nil {
							return nil, err
						}
						paramsJSON = text
					}
				}
				resultJSON, hasResultJSON := body["result_json"].(string)
				if result, ok := body["result"]; ok && !hasResultJSON {
					text, err := encode(result)
					if err != nil {
						return nil, err
					}
					resultJSON, hasResultJSON = text, true
				}
				prefixed := func(id string) string {
					if strings.TrimSpace(id) == "" {
						return id
					}
					return v.ID() + "/" + id
				}
				runID := prefixed(str(event, "run_id"))
				acceptsAsk, _ := event["accepts_ask"].(bool)
				opts := []loopwarden.EventOption{loopwarden.WithAgentID(str(event, "agent_id")), loopwarden.WithSeq(seq),
					loopwarden.WithParentRunID(prefixed(str(event, "parent_run_id"))), loopwarden.WithAcceptsAsk(acceptsAsk)}
				toolName := str(body, "tool_name")
				call := append([]loopwarden.EventOption{loopwarden.WithToolCallID(str(body, "tool_call_id")),
					loopwarden.WithParamsJSON(paramsJSON)}, opts...)
				var build func(runID string) (loopwarden.Event, error)
				switch kind {
				case "tool_call":
					build = func(runID string) (loopwarden.Event, error) {
						return loopwarden.ToolCallEvent(runID, toolName, nil, call...)
					}
				case "tool_outcome":
					call = append(call, loopwarden.WithDuration(time.Duration(number(body, "duration_ms"))*time.Millisecond))
					if errText, ok := body["error"].(string); ok {
						call = append(call, loopwarden.WithError(errText))
					} else if hasResultJSON {
						call = append(call, loopwarden.WithResultJSON(resultJSON))
					}
					build = func(runID string) (loopwarden.Event, error) {
						return loopwarden.ToolOutcomeEvent(runID, toolName, nil, call...)
					}
				case "compaction_retry":
					build = func(runID string) (loopwarden.Event, error) {
						return loopwarden.CompactionRetryEvent(runID, opts...), nil
					}
				case "user_turn":
					turn := append(opts, loopwarden.WithPromptID(str(body, "prompt_id")))
					build = func(runID string) (loopwarden.Event, error) { return loopwarden.UserTurnEvent(runID, turn...), nil }
				case "run_end":
					build = func(runID string) (loopwarden.Event, error) { return loopwarden.RunEndEvent(runID, opts...), nil }
				case "usage":
					usage := loopwarden.Usage{InputTokens: uint64(number(body, "input_tokens")),
						OutputTokens: uint64(number(body, "output_tokens")), CostUSD: number(body, "cost_usd"),
						Model: str(body, "model")}
					build = func(runID string) (loopwarden.Event, error) { return loopwarden.UsageEvent(runID, usage, opts...), nil }
				case "approval":
					approved, _ := body["approved"].(bool)
					approval := loopwarden.Approval{ToolCallID: str(body, "tool_call_id"), DecisionID: str(body, "decision_id"),
						Approved: approved, Scope: loopwarden.ApprovalScope(str(body, "scope")),
						TTLSeconds: uint32(number(body, "ttl_seconds"))}
					build = func(runID string) (loopwarden.Event, error) {
						return loopwarden.ApprovalEvent(runID, approval, opts...)
					}
				default:
					build = func(runID string) (loopwarden.Event, error) { return loopwarden.EventWithoutKind(runID, opts...), nil }
				}
				out = append(out, concreteEvent{seq, runID, st.Expect[index], build})
			}
		}
	}
	return out, nil
}
