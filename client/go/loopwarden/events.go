package loopwarden

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	pb "github.com/loopwarden/loopwarden/client/go/loopwardenv1"
)

// Event is one event of a run, built by ToolCallEvent, ToolOutcomeEvent, CompactionRetryEvent,
// UserTurnEvent, UsageEvent, ModelOutputEvent, ApprovalEvent or RunEndEvent, for Client.Evaluate (several events in one request) and Client.Check. The client
// sends it exactly as built: no default agent id, no numbering. The zero Event has no run id, so
// the daemon rejects it.
type Event struct{ message *pb.Event }

// wire is the event's message; never nil, so a zero Event reaches the daemon and is rejected there.
func (e Event) wire() *pb.Event {
	if e.message == nil {
		return &pb.Event{}
	}
	return e.message
}

type eventFields struct {
	agentID, sessionID, toolCallID  string
	batchID, toolClass, promptID    string
	parentRunID, rootRunID          string
	acceptsAsk                      bool
	seq, durationMs                 uint64
	paramsJSON, resultJSON, errText *string
	result                          any
	hasResult                       bool
	extra                           extraFields // the fields without an option of their own (events_gen.go)
}

func fields(opts []EventOption) eventFields {
	var f eventFields
	for _, opt := range opts {
		opt.applyToEvent(&f)
	}
	return f
}

func jsonText(value any) (string, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(value); err != nil {
		return "", fmt.Errorf("loopwarden: encoding JSON: %w", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func paramsText(params any, f eventFields) (string, error) {
	if f.paramsJSON != nil {
		return *f.paramsJSON, nil
	}
	if params == nil {
		return "", nil
	}
	return jsonText(params)
}

func envelope(runID string, f eventFields) *pb.Event {
	event := &pb.Event{RunId: runID, AgentId: f.agentID, SessionId: f.sessionID, Seq: f.seq, ParentRunId: f.parentRunID,
		AcceptsAsk: f.acceptsAsk}
	f.extra.envelope(event)
	return event
}

// ToolCallEvent builds the event sent before a tool runs. params is marshalled to JSON (nil sends
// no arguments) unless WithParamsJSON gives the text.
func ToolCallEvent(runID, toolName string, params any, opts ...EventOption) (Event, error) {
	f := fields(opts)
	text, err := paramsText(params, f)
	if err != nil {
		return Event{}, err
	}
	class, err := toolClass(f.toolClass)
	if err != nil {
		return Event{}, err
	}
	call := &pb.ToolCall{ToolName: toolName, ToolCallId: f.toolCallID, ParamsJson: text, ToolClass: class,
		BatchId: f.batchID}
	f.extra.toolCall(call)
	event := envelope(runID, f)
	event.Kind = &pb.Event_ToolCall{ToolCall: call}
	return Event{event}, nil
}

// toolClass is ToolCall.tool_class for a class as the config spells it ("" = unspecified).
func toolClass(name string) (pb.ToolClass, error) {
	if name == "" {
		return pb.ToolClass_TOOL_CLASS_UNSPECIFIED, nil
	}
	names := make([]string, 0, len(toolClassNames))
	for class, spelled := range toolClassNames {
		if spelled == name {
			return class, nil
		}
		names = append(names, strconv.Quote(spelled))
	}
	sort.Strings(names)
	return 0, fmt.Errorf("loopwarden: tool class must be one of %s (or empty), got %q", strings.Join(names, ", "), name)
}

// ToolOutcomeEvent builds the event sent after a tool ran, with the call's params and what it
// returned (WithResult, WithResultJSON) or its error (WithError); WithDuration says how long it ran.
func ToolOutcomeEvent(runID, toolName string, params any, opts ...EventOption) (Event, error) {
	f := fields(opts)
	text, err := paramsText(params, f)
	if err != nil {
		return Event{}, err
	}
	outcome := &pb.ToolOutcome{ToolName: toolName, ToolCallId: f.toolCallID, ParamsJson: text, DurationMs: f.durationMs}
	f.extra.toolOutcome(outcome)
	switch {
	case f.errText != nil:
		outcome.Outcome = &pb.ToolOutcome_Error{Error: *f.errText}
	case f.resultJSON != nil:
		outcome.Outcome = &pb.ToolOutcome_ResultJson{ResultJson: *f.resultJSON}
	case f.hasResult:
		result, err := jsonText(f.result)
		if err != nil {
			return Event{}, err
		}
		outcome.Outcome = &pb.ToolOutcome_ResultJson{ResultJson: result}
	}
	event := envelope(runID, f)
	event.Kind = &pb.Event_ToolOutcome{ToolOutcome: outcome}
	return Event{event}, nil
}

// CompactionRetryEvent builds the event that arms the post-compaction guard.
func CompactionRetryEvent(runID string, opts ...EventOption) Event {
	f := fields(opts)
	retry := &pb.CompactionRetry{}
	f.extra.compactionRetry(retry)
	event := envelope(runID, f)
	event.Kind = &pb.Event_CompactionRetry{CompactionRetry: retry}
	return Event{event}
}

// UserTurnEvent builds the event that says a person or an orchestrator sent the run a new
// instruction: the run starts fresh for loop detection (loopwarden.userTurnResets); an aborted run
// stays aborted. WithPromptID names the prompt.
func UserTurnEvent(runID string, opts ...EventOption) Event {
	f := fields(opts)
	turn := &pb.UserTurn{PromptId: f.promptID}
	f.extra.userTurn(turn)
	event := envelope(runID, f)
	event.Kind = &pb.Event_UserTurn{UserTurn: turn}
	return Event{event}
}

// Usage is what one model response cost, for the tree's token and cost budgets
// (loopwarden.budgets.tokensPerTree, costUsdPerTree).
type Usage struct {
	// InputTokens and OutputTokens are the response's token counts.
	InputTokens, OutputTokens uint64
	// CostUSD is its cost in US dollars: finite and not negative.
	CostUSD float64
	// Model is carried into the daemon's logs only.
	Model string
}

// UsageEvent builds the event that reports what one model response cost. The daemon counts it
// once (a retry with the same seq and content spends nothing) into the run's tree totals.
func UsageEvent(runID string, usage Usage, opts ...EventOption) Event {
	f := fields(opts)
	message := &pb.Usage{InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens, CostUsd: usage.CostUSD,
		Model: usage.Model}
	f.extra.usage(message)
	event := envelope(runID, f)
	event.Kind = &pb.Event_Usage{Usage: message}
	return Event{event}
}

// OutputKind is what a model output is: each kind is its own stream of repeats.
type OutputKind string

// The kinds of a model output.
const (
	// OutputMessage is a message of the model (the zero kind is taken as one).
	OutputMessage OutputKind = "message"
	// OutputThought is reasoning or thought text.
	OutputThought OutputKind = "thought"
	// OutputFinalAnswer is the answer the turn ends with (a Stop hook's last assistant message).
	OutputFinalAnswer OutputKind = "final_answer"
)

// ModelOutput is what the model said, for the detectors of loops without tool calls.
type ModelOutput struct {
	// Text is what the model said; the daemon keeps digests of it, never the text.
	Text string
	// TextDigest is, instead of Text, your own digest of the normalised text (compared for
	// equality only); without Text a message made of one chunk repeated is not recognised.
	TextDigest string
	// Kind is OutputMessage (or empty), OutputThought or OutputFinalAnswer.
	Kind OutputKind
	// StopHookActive: a stop hook already kept this turn going once (Claude Code's
	// stop_hook_active, Cursor's loop_count > 0).
	StopHookActive bool
	// Usage, when set, is what the response cost: spent into the budgets as a UsageEvent is.
	Usage *Usage
}

func (o ModelOutput) kind() (pb.OutputKind, error) {
	switch o.Kind {
	case "":
		return pb.OutputKind_OUTPUT_KIND_UNSPECIFIED, nil
	case OutputMessage:
		return pb.OutputKind_OUTPUT_KIND_MESSAGE, nil
	case OutputThought:
		return pb.OutputKind_OUTPUT_KIND_THOUGHT, nil
	case OutputFinalAnswer:
		return pb.OutputKind_OUTPUT_KIND_FINAL_ANSWER, nil
	}
	return 0, fmt.Errorf("loopwarden: output kind must be %q, %q or %q, got %q", OutputMessage, OutputThought,
		OutputFinalAnswer, o.Kind)
}

// ModelOutputEvent builds the event that reports what the model said. Its verdict is ALLOW, WARN
// (show the message) or ABORT (end the run; for a stop hook, end the session). An error for an
// unknown kind; the daemon rejects an output with neither Text nor TextDigest.
func ModelOutputEvent(runID string, output ModelOutput, opts ...EventOption) (Event, error) {
	kind, err := output.kind()
	if err != nil {
		return Event{}, err
	}
	f := fields(opts)
	message := &pb.ModelOutput{Text: output.Text, TextDigest: output.TextDigest, OutputKind: kind,
		StopHookActive: output.StopHookActive}
	if u := output.Usage; u != nil {
		message.Usage = &pb.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CostUsd: u.CostUSD,
			Model: u.Model}
	}
	f.extra.modelOutput(message)
	event := envelope(runID, f)
	event.Kind = &pb.Event_ModelOutput{ModelOutput: message}
	return Event{event}, nil
}

// ApprovalScope is how far a human's approval reaches.
type ApprovalScope string

// The scopes of an approval.
const (
	// ScopeOnce approves this call only: the pattern's next critical asks again. The zero scope
	// is taken as once.
	ScopeOnce ApprovalScope = "once"
	// ScopeAlways is a standing exemption for the agent, tool and projected arguments, until
	// Approval.TTLSeconds pass (0: the daemon's loopwarden.exemptionTtlSeconds).
	ScopeAlways ApprovalScope = "always"
)

// Approval is a human's answer to an ActionAsk verdict.
type Approval struct {
	// ToolCallID names the asked call; DecisionID (the ASK verdict's) names it when it had none.
	ToolCallID, DecisionID string
	// Approved: the call may run; false: it must not, and the pattern's later criticals block.
	Approved bool
	// Scope is ScopeOnce (or empty) or ScopeAlways.
	Scope ApprovalScope
	// TTLSeconds is how long an "always" exemption stands; 0: the daemon's default.
	TTLSeconds uint32
}

func (a Approval) scope() (pb.ApprovalScope, error) {
	switch a.Scope {
	case "":
		return pb.ApprovalScope_APPROVAL_SCOPE_UNSPECIFIED, nil
	case ScopeOnce:
		return pb.ApprovalScope_APPROVAL_SCOPE_ONCE, nil
	case ScopeAlways:
		return pb.ApprovalScope_APPROVAL_SCOPE_ALWAYS, nil
	}
	return 0, fmt.Errorf("loopwarden: approval scope must be %q or %q, got %q", ScopeOnce, ScopeAlways, a.Scope)
}

// ApprovalEvent builds the event that reports a human's answer to an ASK. An error when the
// approval names no call (neither ToolCallID nor DecisionID) or has an unknown scope.
func ApprovalEvent(runID string, approval Approval, opts ...EventOption) (Event, error) {
	scope, err := approval.scope()
	if err != nil {
		return Event{}, err
	}
	if approval.ToolCallID == "" && approval.DecisionID == "" {
		return Event{}, errors.New("loopwarden: an approval names the asked call: set ToolCallID or DecisionID")
	}
	f := fields(opts)
	message := &pb.Approval{ToolCallId: approval.ToolCallID, DecisionId: approval.DecisionID,
		Approved: approval.Approved, Scope: scope, TtlSeconds: approval.TTLSeconds}
	f.extra.approval(message)
	event := envelope(runID, f)
	event.Kind = &pb.Event_Approval{Approval: message}
	return Event{event}, nil
}

// RunEndEvent builds the event that frees a run's state.
func RunEndEvent(runID string, opts ...EventOption) Event {
	f := fields(opts)
	end := &pb.RunEnd{}
	f.extra.runEnd(end)
	event := envelope(runID, f)
	event.Kind = &pb.Event_RunEnd{RunEnd: end}
	return Event{event}
}
