package loopwarden

import (
	"strings"

	pb "github.com/loopwarden/loopwarden/client/go/loopwardenv1"
)

// Action is what the runner must do, the lower-case name of the proto's Action ("allow", …).
type Action string

// The actions of a verdict.
const (
	// ActionAllow means run the call; for other events, that the event was recorded.
	ActionAllow Action = "allow"
	// ActionWarn means run the call and show the message.
	ActionWarn Action = "warn"
	// ActionBlock means do not run the call; hand the message to the model as a blocked tool result.
	ActionBlock Action = "block"
	// ActionAbort means the run is over.
	ActionAbort Action = "abort"
	// ActionReject means the event was malformed (see ErrorCode and Message); nothing was recorded.
	ActionReject Action = "reject"
	// ActionAsk means hold the call for a human: show them the message, run the call only if they
	// approve, and report their answer (Client.Approval). Sent only for events with accepts_ask
	// (WithAcceptsAsk).
	ActionAsk Action = "ask"
)

// actions are the actions this client knows, by wire value.
var actions = map[pb.Action]Action{
	pb.Action_ACTION_ALLOW: ActionAllow, pb.Action_ACTION_WARN: ActionWarn, pb.Action_ACTION_BLOCK: ActionBlock,
	pb.Action_ACTION_ABORT: ActionAbort, pb.Action_ACTION_REJECT: ActionReject, pb.Action_ACTION_ASK: ActionAsk,
}

// actionOf is the client's Action for a wire value. One this client does not know (a newer
// daemon's) is ActionBlock: not running the call is the safe reading, and a runner never meets an
// action it cannot handle.
func actionOf(a pb.Action) Action {
	if action, ok := actions[a]; ok {
		return action
	}
	return ActionBlock
}

// Verdict is the daemon's answer to one event, with lower-case names ("generic_repeat",
// "warning"), the same shape as the Python and Node clients' verdicts.
type Verdict struct {
	// Seq echoes the event's seq.
	Seq uint64
	// RunID echoes the event's run id (trimmed).
	RunID string
	// Action is what the runner must do.
	Action Action
	// Detector names the rule that decided: "generic_repeat", "ping_pong", … ("" for a plain
	// allow or a reject).
	Detector string
	// Level is "warning" or "critical" when a detector matched.
	Level string
	// Count is the count that crossed the threshold.
	Count uint32
	// Message is the text for the agent or the run log; for a reject, what is wrong with which field.
	Message string
	// WarningKey identifies the pattern (spec section 5).
	WarningKey string
	// Announce is true for a warning first in its decade for this key and run, and for every
	// BLOCK and ABORT.
	Announce bool
	// PairedToolName is the ping-pong partner.
	PairedToolName string
	// ErrorCode is "compaction_loop_persisted" or "tool_loop_persisted" on an abort, and the
	// input error code on a reject.
	ErrorCode string
	// ToolName is the normalised tool name the verdict is about ("" for events without one).
	ToolName string
	// DecisionID names the decision in the daemon's log and InspectRun (WARN, BLOCK, ABORT).
	DecisionID string
	// EvidenceSeqs are the seqs of the records that formed the pattern, oldest first.
	EvidenceSeqs []uint64
	// EvidenceCallIDs are the tool call ids of those records the daemon still holds.
	EvidenceCallIDs []string
	// LoopStartedSeq is the seq of the oldest record of the pattern: where the loop started.
	LoopStartedSeq uint64
	// Shadow is true in shadow mode: the verdict was computed but not enforced.
	Shadow bool
	// ShadowAction is what shadow mode withheld (block or abort); "" unless Shadow.
	ShadowAction Action
}

// MayRun reports whether the tool call may go ahead (ALLOW or WARN); an ASK may not until a
// human approves.
func (v Verdict) MayRun() bool { return v.Action == ActionAllow || v.Action == ActionWarn }

// shortName turns DETECTOR_PING_PONG into ping_pong and any *_UNSPECIFIED into "".
func shortName(name, prefix string) string {
	short := strings.ToLower(strings.TrimPrefix(name, prefix))
	if short == "unspecified" {
		return ""
	}
	return short
}

func verdictFromMessage(m *pb.Verdict) Verdict {
	return Verdict{
		Seq:             m.GetSeq(),
		RunID:           m.GetRunId(),
		Action:          actionOf(m.GetAction()),
		Detector:        shortName(m.GetDetector().String(), "DETECTOR_"),
		Level:           shortName(m.GetLevel().String(), "LEVEL_"),
		Count:           m.GetCount(),
		Message:         m.GetMessage(),
		WarningKey:      m.GetWarningKey(),
		Announce:        m.GetAnnounce(),
		PairedToolName:  m.GetPairedToolName(),
		ErrorCode:       m.GetErrorCode(),
		ToolName:        m.GetToolName(),
		DecisionID:      m.GetDecisionId(),
		EvidenceSeqs:    m.GetEvidence().GetSeqs(),
		EvidenceCallIDs: m.GetEvidence().GetToolCallIds(),
		LoopStartedSeq:  m.GetEvidence().GetLoopStartedSeq(),
		Shadow:          m.GetShadow(),
		ShadowAction:    shadowAction(m),
	}
}

func shadowAction(m *pb.Verdict) Action {
	if !m.GetShadow() {
		return ""
	}
	return actionOf(m.GetShadowAction())
}

// generated:run-record:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)

// RunRecord is one entry of a run's history.
type RunRecord struct {
	// Seq is the seq of the event that created the record.
	Seq uint64
	// ToolName is the tool as the call that formed the record spelled it (args_hash is over the
	// normalised name).
	ToolName string
	// ArgsHash is the hash of the call's projected arguments.
	ArgsHash string
	// ToolCallID is the call's tool call id, if it had one.
	ToolCallID string
	// ResultHash is the hash of the outcome; empty while the call is pending (no outcome yet).
	ResultHash string
	// UnknownToolName is the missing tool's name when the outcome's error said no such tool
	// exists.
	UnknownToolName string
}

// generated:run-record:end

// RunInspection is the read-only view InspectRun gives of one run.
type RunInspection struct {
	// RunID is the inspected run.
	RunID string
	// AgentID is the agent of the run's latest event ("": the global config applies).
	AgentID string
	// Records is the run's history, oldest first, at most historySize of them.
	Records []RunRecord
	// GuardArmed is true while the post-compaction guard is armed.
	GuardArmed bool
	// GuardWindowSize is the number of slots of the guard's current window.
	GuardWindowSize uint32
	// GuardObserved is the number of observations made in the guard's current window.
	GuardObserved uint32
	// Blocks is the number of BLOCK verdicts given to this run so far.
	Blocks uint32
	// Aborted is true once the run was aborted; its later tool calls get ABORT until RunEnd.
	Aborted bool
	// AbortErrorCode is the abort's error code, when Aborted.
	AbortErrorCode string
	// EffectiveConfig is the tools.loopDetection settings in force for this run.
	EffectiveConfig EffectiveConfig
	// EventsEvaluated is the number of events of this run the daemon evaluated (rejects excluded).
	EventsEvaluated uint64
	// ParentRunID is the run's parent ("" for a root run).
	ParentRunID string
	// Children are the run's child runs, oldest first (ended ones too).
	Children []string
	// RootRunID is the root of the run's tree (the run itself for a root).
	RootRunID string
	// Depth is the run's depth in its tree (root: 0).
	Depth uint32
	// TreeTotals is what the whole tree has spent.
	TreeTotals Totals
	// RunTotals is what this run alone has spent.
	RunTotals Totals
	// Exemptions are the standing approvals of the run's tenant that apply to this run's agent.
	Exemptions []Exemption
	// OutputStreaks are the counts the detectors of loops without tool calls judge the run by.
	OutputStreaks OutputStreaks
}

// OutputStreaks are where the detectors of loops without tool calls stand for a run (all 0:
// none counted anything).
type OutputStreaks struct {
	// Messages, Thoughts and FinalAnswers are repeated_output's identical outputs in a row.
	Messages, Thoughts, FinalAnswers uint32
	// Compactions are compaction_storm's compactions since the last new tool result.
	Compactions uint32
	// StopContinuations are stop_continuation's final answers a stop hook kept going, in a row.
	StopContinuations uint32
	// FinalAnswerTurns are repeated_final_answer's turns in a row ending in the same answer.
	FinalAnswerTurns uint32
}

// Totals is spending counted for loopwarden.budgets, of a run or of its whole tree.
type Totals struct {
	// ToolCalls is the number of tool calls evaluated (retries once).
	ToolCalls uint64
	// ToolMs is the sum of the outcomes' durations, in milliseconds.
	ToolMs uint64
	// InputTokens and OutputTokens are the sums of the usage events' tokens.
	InputTokens, OutputTokens uint64
	// CostUSD is the sum of the usage events' costs.
	CostUSD float64
	// WallSeconds is the time since the run's (the tree's) first event.
	WallSeconds float64
	// Runs is the number of runs of the tree so far, ended ones too; 1 for a run alone.
	Runs uint32
}

// Exemption is a standing approval (an "always" answer to an ASK): criticals of this agent, tool
// and projected arguments are allowed until it expires; budgets and the breakers still apply.
type Exemption struct {
	// ID names it for RevokeExemption.
	ID string
	// AgentID is its agent ("": the global config's agent).
	AgentID string
	// ToolName is the normalised tool name.
	ToolName string
	// ArgsHash is the digest of the projected arguments (as RunRecord.ArgsHash).
	ArgsHash string
	// CreatedAt and ExpiresAt are unix seconds.
	CreatedAt, ExpiresAt float64
	// RunID is the run whose ASK it answered.
	RunID string
}

func totalsFromMessage(m *pb.Totals) Totals {
	return Totals{ToolCalls: m.GetToolCalls(), ToolMs: m.GetToolMs(), InputTokens: m.GetInputTokens(),
		OutputTokens: m.GetOutputTokens(), CostUSD: m.GetCostUsd(), WallSeconds: m.GetWallSeconds(), Runs: m.GetRuns()}
}

func exemptionFromMessage(m *pb.Exemption) Exemption {
	return Exemption{ID: m.GetId(), AgentID: m.GetAgentId(), ToolName: m.GetToolName(), ArgsHash: m.GetArgsHash(),
		CreatedAt: m.GetCreatedAt(), ExpiresAt: m.GetExpiresAt(), RunID: m.GetRunId()}
}

func exemptionsFromMessages(ms []*pb.Exemption) []Exemption {
	out := make([]Exemption, len(ms))
	for i, m := range ms {
		out[i] = exemptionFromMessage(m)
	}
	return out
}

// generated:run-record-from-message:begin (proto/loopwarden/v1/loopwarden.proto: edit there, then `make tables`)
func runRecordFromMessage(m *pb.RunRecord) RunRecord {
	return RunRecord{
		Seq:             m.GetSeq(),
		ToolName:        m.GetToolName(),
		ArgsHash:        m.GetArgsHash(),
		ToolCallID:      m.GetToolCallId(),
		ResultHash:      m.GetResultHash(),
		UnknownToolName: m.GetUnknownToolName(),
	}
}

// generated:run-record-from-message:end

func inspectionFromMessage(m *pb.InspectRunResponse) RunInspection {
	records := make([]RunRecord, len(m.GetRecords()))
	for i, r := range m.GetRecords() {
		records[i] = runRecordFromMessage(r)
	}
	return RunInspection{
		RunID: m.GetRunId(), AgentID: m.GetAgentId(), Records: records,
		GuardArmed: m.GetGuard().GetArmed(), GuardWindowSize: m.GetGuard().GetWindowSize(),
		GuardObserved: m.GetGuard().GetObserved(), Blocks: m.GetBlocks(), Aborted: m.GetAborted(),
		AbortErrorCode: m.GetAbortErrorCode(), EffectiveConfig: effectiveConfigFromMessage(m.GetEffectiveConfig()),
		EventsEvaluated: m.GetEventsEvaluated(),
		ParentRunID:     m.GetParentRunId(),
		Children:        m.GetChildren(),
		RootRunID:       m.GetRootRunId(),
		Depth:           m.GetDepth(),
		TreeTotals:      totalsFromMessage(m.GetTreeTotals()),
		RunTotals:       totalsFromMessage(m.GetRunTotals()),
		Exemptions:      exemptionsFromMessages(m.GetExemptions()),
		OutputStreaks:   outputStreaksFromMessage(m.GetOutputStreaks()),
	}
}

func outputStreaksFromMessage(m *pb.OutputStreaks) OutputStreaks {
	return OutputStreaks{Messages: m.GetMessages(), Thoughts: m.GetThoughts(), FinalAnswers: m.GetFinalAnswers(),
		Compactions: m.GetCompactions(), StopContinuations: m.GetStopContinuations(),
		FinalAnswerTurns: m.GetFinalAnswerTurns()}
}
