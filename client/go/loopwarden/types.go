package loopwarden

import (
	"strings"

	pb "github.com/loopwarden/loopwarden/client/go/loopwardenv1"
)

// Action is what the runner must do.
type Action string

const (
	ActionAllow  Action = "allow"  // run the call / the event was recorded
	ActionWarn   Action = "warn"   // run the call and show the message
	ActionBlock  Action = "block"  // do not run the call; hand the message to the model
	ActionAbort  Action = "abort"  // the run is over
	ActionReject Action = "reject" // the event was malformed; nothing was recorded
)

// Verdict is the daemon's answer to one event, with lower-case names ("generic_repeat",
// "warning"), the same shape as the Python and Node clients' verdicts.
type Verdict struct {
	Seq            uint64
	RunID          string
	Action         Action
	Detector       string // "generic_repeat", "ping_pong", … ("" for a plain allow)
	Level          string // "warning" or "critical" when a detector matched
	Count          uint32
	Message        string
	WarningKey     string
	Announce       bool
	PairedToolName string
	ErrorCode      string
	ToolName       string
	// DecisionID names the decision in the daemon's log and InspectRun (WARN, BLOCK, ABORT).
	DecisionID string
	// EvidenceSeqs are the seqs of the records that formed the pattern, oldest first;
	// EvidenceCallIDs the call ids of those records the daemon still holds.
	EvidenceSeqs    []uint64
	EvidenceCallIDs []string
	LoopStartedSeq  uint64
	// Shadow mode: the verdict was computed but not enforced; ShadowAction is what it withheld.
	Shadow       bool
	ShadowAction Action
}

// MayRun: the tool call may go ahead (ALLOW or WARN).
func (v Verdict) MayRun() bool { return v.Action == ActionAllow || v.Action == ActionWarn }

// shortName turns DETECTOR_PING_PONG into ping_pong and any *_UNSPECIFIED into "".
func shortName(name, prefix string) string {
	short := strings.ToLower(strings.TrimPrefix(name, prefix))
	if short == "unspecified" {
		return ""
	}
	return short
}

// VerdictFromMessage converts the wire verdict.
func VerdictFromMessage(m *pb.Verdict) Verdict {
	return Verdict{
		Seq:             m.GetSeq(),
		RunID:           m.GetRunId(),
		Action:          Action(shortName(m.GetAction().String(), "ACTION_")),
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
	return Action(shortName(m.GetShadowAction().String(), "ACTION_"))
}

// RunRecord is one entry of a run's history.
type RunRecord struct {
	Seq             uint64
	ToolName        string
	ArgsHash        string
	ToolCallID      string
	ResultHash      string // "" while pending
	UnknownToolName string
}

// RunInspection is the read-only view InspectRun gives of one run.
type RunInspection struct {
	RunID           string
	AgentID         string
	Records         []RunRecord
	GuardArmed      bool
	GuardWindowSize uint32
	GuardObserved   uint32
	Blocks          uint32
	Aborted         bool
	AbortErrorCode  string
	EffectiveConfig *pb.EffectiveConfig
	EventsEvaluated uint64
}

func inspectionFromMessage(m *pb.InspectRunResponse) RunInspection {
	records := make([]RunRecord, len(m.GetRecords()))
	for i, r := range m.GetRecords() {
		records[i] = RunRecord{r.GetSeq(), r.GetToolName(), r.GetArgsHash(), r.GetToolCallId(), r.GetResultHash(),
			r.GetUnknownToolName()}
	}
	return RunInspection{
		RunID: m.GetRunId(), AgentID: m.GetAgentId(), Records: records,
		GuardArmed: m.GetGuard().GetArmed(), GuardWindowSize: m.GetGuard().GetWindowSize(),
		GuardObserved: m.GetGuard().GetObserved(), Blocks: m.GetBlocks(), Aborted: m.GetAborted(),
		AbortErrorCode: m.GetAbortErrorCode(), EffectiveConfig: m.GetEffectiveConfig(),
		EventsEvaluated: m.GetEventsEvaluated(),
	}
}
