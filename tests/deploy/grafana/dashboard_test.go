// Package grafana checks the chart's Grafana dashboard with Grafana's own schema, as the Grafana
// Foundation SDK generates it: a strict decode (an unknown or misspelt field, a missing required
// field or a wrong type each fail, down to every panel's options and every Prometheus query),
// then the SDK's validation.
//
// NOTE(loopwarden): the SDK decodes a panel's options strictly only for panel types whose plugin
// is registered, and falls back to a lenient decode otherwise; TestEveryPanelTypeIsDecodedStrictly
// keeps the dashboard on registered types, so nothing slips through that fallback.
package grafana

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// The pytest driver (tests/deploy/test_dashboard_schema.py) points this at a broken copy once, to
// show that the check fails.
var dashboardPath = flag.String("dashboard", "../../../helm/loopwarden/files/loopwarden-dashboard.json",
	"the dashboard JSON file to check")

func TestMain(m *testing.M) {
	flag.Parse()
	plugins.RegisterDefaultPlugins()
	os.Exit(m.Run())
}

// check decodes raw strictly and validates it; it returns one line per problem, each path
// annotated with the panel's id and title so that a reader finds it in the file.
func check(raw []byte) []string {
	var board dashboard.Dashboard
	var problems []string
	if err := board.UnmarshalJSONStrict(raw); failed(err) {
		problems = append(problems, describe(raw, "decode", err)...)
	}
	if err := board.Validate(); failed(err) {
		problems = append(problems, describe(raw, "validate", err)...)
	}
	return problems
}

// failed: UnmarshalJSONStrict returns its list of problems even when the list is empty.
func failed(err error) bool {
	var problems cog.BuildErrors
	if errors.As(err, &problems) {
		return len(problems) > 0
	}
	return err != nil
}

var panelIndex = regexp.MustCompile(`^panels\[(\d+)\]`)

func describe(raw []byte, stage string, err error) []string {
	var file struct {
		Panels []struct {
			ID    int    `json:"id"`
			Title string `json:"title"`
		} `json:"panels"`
	}
	_ = json.Unmarshal(raw, &file)
	var lines []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if match := panelIndex.FindStringSubmatch(line); match != nil {
			if index, _ := strconv.Atoi(match[1]); index < len(file.Panels) {
				panel := file.Panels[index]
				line = fmt.Sprintf("%s (panel id %d %q)%s", match[0], panel.ID, panel.Title, line[len(match[0]):])
			}
		}
		lines = append(lines, stage+": "+line)
	}
	return lines
}

func readDashboard(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(*dashboardPath)
	if err != nil {
		t.Fatalf("cannot read the dashboard: %v", err)
	}
	board, err := withoutImportEnvelope(raw)
	if err != nil {
		t.Fatalf("the dashboard is not a JSON object: %v", err)
	}
	return board
}

// importEnvelope: the keys Grafana's import page reads (deploy/grafana/loopwarden-dashboard.json,
// written by scripts/gen_dashboard_import.py) and drops before it stores the dashboard; they are
// not part of the dashboard model, so the SDK's strict decode does not know them.
var importEnvelope = []string{"__inputs", "__elements", "__requires"}

func withoutImportEnvelope(raw []byte) ([]byte, error) {
	var board map[string]json.RawMessage
	if err := json.Unmarshal(raw, &board); err != nil {
		return nil, err
	}
	found := false
	for _, key := range importEnvelope {
		if _, ok := board[key]; ok {
			delete(board, key)
			found = true
		}
	}
	if !found {
		return raw, nil
	}
	return json.Marshal(board)
}

// TestDashboardMatchesGrafanaSchema: the dashboard decodes strictly and passes validation.
func TestDashboardMatchesGrafanaSchema(t *testing.T) {
	for _, problem := range check(readDashboard(t)) {
		t.Error(problem)
	}
}

// TestEveryPanelTypeIsDecodedStrictly: each panel type has a registered plugin with a strict
// options decoder, and each query's datasource type a registered query schema.
func TestEveryPanelTypeIsDecodedStrictly(t *testing.T) {
	var file struct {
		Panels []struct {
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource *struct {
				Type string `json:"type"`
			} `json:"datasource"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(readDashboard(t), &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, panel := range file.Panels {
		if panel.Type == "row" {
			continue
		}
		config, found := cog.ConfigForPanelcfgVariant(panel.Type)
		if !found || config.StrictOptionsUnmarshaler == nil {
			t.Errorf("panel %q: type %q has no strict options schema in the SDK", panel.Title, panel.Type)
		}
		if panel.Datasource == nil || panel.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource type must be prometheus, so its queries decode as Prometheus queries", panel.Title)
		}
	}
}

// TestInjectedUnknownFieldsFail: the check is no rubber stamp. An unknown field at each level of
// the file, from the top to a panel's options and a query, fails with the field's name.
func TestInjectedUnknownFieldsFail(t *testing.T) {
	raw := readDashboard(t)
	cases := []struct {
		where, field string
		inject       func(board map[string]any, field string)
	}{
		{"top level", "refreshIntervall", func(b map[string]any, f string) { b[f] = "1m" }},
		{"variable", "hidden", func(b map[string]any, f string) { variables(b)[0][f] = true }},
		{"panel", "titel", func(b map[string]any, f string) { firstPanel(b, "timeseries")[f] = "x" }},
		{"stat options", "colourMode", func(b map[string]any, f string) { options(b, "stat")[f] = "value" }},
		{"table options", "showHeaders", func(b map[string]any, f string) { options(b, "table")[f] = true }},
		{"query", "exp", func(b map[string]any, f string) { firstTarget(b)[f] = "up" }},
	}
	for _, c := range cases {
		t.Run(c.where, func(t *testing.T) {
			var board map[string]any
			if err := json.Unmarshal(raw, &board); err != nil {
				t.Fatal(err)
			}
			c.inject(board, c.field)
			broken, err := json.Marshal(board)
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("unexpected field '%s'", c.field)
			if problems := check(broken); !strings.Contains(strings.Join(problems, "\n"), want) {
				t.Fatalf("%s: an injected unknown field %q passed the check; problems: %q", c.where, c.field, problems)
			}
		})
	}
}

func variables(board map[string]any) []map[string]any {
	var out []map[string]any
	for _, variable := range board["templating"].(map[string]any)["list"].([]any) {
		out = append(out, variable.(map[string]any))
	}
	return out
}

func firstPanel(board map[string]any, panelType string) map[string]any {
	for _, panel := range board["panels"].([]any) {
		if p := panel.(map[string]any); p["type"] == panelType {
			return p
		}
	}
	panic("no panel of type " + panelType)
}

func options(board map[string]any, panelType string) map[string]any {
	return firstPanel(board, panelType)["options"].(map[string]any)
}

func firstTarget(board map[string]any) map[string]any {
	return firstPanel(board, "timeseries")["targets"].([]any)[0].(map[string]any)
}
