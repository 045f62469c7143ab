package loopwarden

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// NOTE: every option is spelled WithX, and a setting that exists at several levels has one name at
// all of them: WithAgentID works for New, NewGuard and a single event, the way agent_id / agentId
// does in the Python and Node clients. That is why the three option kinds are interfaces with an
// unexported method rather than func types: one value can satisfy all three.

// Option configures a Client; pass it to New.
type Option interface{ applyToClient(*Client) }

// GuardOption configures a Guard; pass it to NewGuard.
type GuardOption interface{ applyToGuard(*Guard) }

// EventOption sets an optional field of one event; pass it to the event verbs of Client
// (ToolCall, ToolOutcome, CompactionRetry, UserTurn, Usage, Approval, RunEnd), to Guard.Call or to
// the event builders (ToolCallEvent, ToolOutcomeEvent, CompactionRetryEvent, UserTurnEvent,
// UsageEvent, ApprovalEvent, RunEndEvent).
type EventOption interface{ applyToEvent(*eventFields) }

type clientOption func(*Client)

func (o clientOption) applyToClient(c *Client) { o(c) }

type guardOption func(*Guard)

func (o guardOption) applyToGuard(g *Guard) { o(g) }

type eventOption func(*eventFields)

func (o eventOption) applyToEvent(f *eventFields) { o(f) }

// ------------------------------------------------------------------------------ every level

// AgentIDOption is the option WithAgentID returns. It is an Option, a GuardOption and an
// EventOption.
type AgentIDOption struct{ agentID string }

// WithAgentID selects agents.list[id] of the daemon's config. Passed to New it is the agent id of
// every event the client builds; to NewGuard, of the guard's events; to an event verb, Guard.Call
// or an event builder, of that event alone. The narrower level wins.
func WithAgentID(agentID string) AgentIDOption { return AgentIDOption{agentID} }

func (o AgentIDOption) applyToClient(c *Client)     { c.agentID = o.agentID }
func (o AgentIDOption) applyToGuard(g *Guard)       { g.agentID = o.agentID }
func (o AgentIDOption) applyToEvent(f *eventFields) { f.agentID = o.agentID }

// AcceptsAskOption is the option WithAcceptsAsk returns. It is an Option and an EventOption.
type AcceptsAskOption struct{ acceptsAsk bool }

// WithAcceptsAsk says the caller can hold a call for a human (Event.accepts_ask): criticals and
// budgets configured to ask are then answered ActionAsk instead of a BLOCK (or ABORT). Passed to
// New it holds for every event the client's verbs build; to a verb or a builder, for that event.
// A Guard sets it itself when it has an ask handler (WithAskHandler).
func WithAcceptsAsk(acceptsAsk bool) AcceptsAskOption { return AcceptsAskOption{acceptsAsk} }

func (o AcceptsAskOption) applyToClient(c *Client)     { c.acceptsAsk = o.acceptsAsk }
func (o AcceptsAskOption) applyToEvent(f *eventFields) { f.acceptsAsk = o.acceptsAsk }

// RunTreeOption is the option WithParentRunID and WithRootRunID return. It is a GuardOption and
// an EventOption.
type RunTreeOption struct {
	apply func(parent, root *string)
}

// WithParentRunID makes the event's run a child run (a sub-agent) of parentRunID, in the same
// tenant; a run's parent is fixed by its first event. The client routes a child by its tree's
// root. Passed to NewGuard it holds for every event of the guard (Guard.Child sets it).
func WithParentRunID(parentRunID string) RunTreeOption {
	return RunTreeOption{func(parent, _ *string) { *parent = parentRunID }}
}

// WithRootRunID names the root of the event's run tree, for routing, when this client never saw
// the chain of parents (a sub-agent in another process). The event does not carry it.
func WithRootRunID(rootRunID string) RunTreeOption {
	return RunTreeOption{func(_, root *string) { *root = rootRunID }}
}

func (o RunTreeOption) applyToGuard(g *Guard)       { o.apply(&g.parentRunID, &g.rootRunID) }
func (o RunTreeOption) applyToEvent(f *eventFields) { o.apply(&f.parentRunID, &f.rootRunID) }

// ------------------------------------------------------------------------------ client

// WithMetadata adds gRPC metadata (key, value pairs; an odd count panics) to every call.
func WithMetadata(kv ...string) Option {
	return clientOption(func(c *Client) { c.md = metadata.Join(c.md, metadata.Pairs(kv...)) })
}

// WithToken sends `authorization: Bearer <token>` on every call (the daemon's --auth-token-file).
func WithToken(token string) Option { return WithMetadata("authorization", "Bearer "+token) }

// WithTimeout sets the deadline of the unary calls Check and Inspect (default 10 s).
func WithTimeout(timeout time.Duration) Option {
	return clientOption(func(c *Client) { c.timeout = timeout })
}

// WithDialOptions replaces the default dial options (insecure transport credentials: loopback or
// a sidecar); for TLS or mTLS pass grpc.WithTransportCredentials(credentials.NewTLS(...)).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return clientOption(func(c *Client) { c.dialOptions = opts })
}

// WithPerRunStreams switches the client to one Evaluate stream per run, each opened with the
// RoutingHeader, at most maxStreams open (least recently used closed first; 0 means 1024): the
// mode for several daemon replicas behind a router that hashes the header. The default, one
// stream for every run, suits one daemon.
func WithPerRunStreams(maxStreams int) Option {
	return clientOption(func(c *Client) {
		if maxStreams <= 0 {
			maxStreams = 1024
		}
		c.maxRunStreams = maxStreams
	})
}

// ------------------------------------------------------------------------------ guard

// WithWarningHandler replaces the default handling of WARN verdicts (log the announced ones); the
// Python ToolGuard's on_warning. A nil fn keeps the default.
func WithWarningHandler(fn func(Verdict)) GuardOption {
	return guardOption(func(g *Guard) {
		if fn != nil {
			g.onWarning = fn
		}
	})
}

// WithAskHandler lets a Guard hold a call for a human: its events say accepts_ask, and on an
// ActionAsk verdict it calls fn (show the human v.Message) and reports the answer as an approval;
// the call runs only if fn answers AskOnce or AskAlways. Without a handler an ASK is a BLOCK.
func WithAskHandler(fn func(ctx context.Context, v Verdict) AskAnswer) GuardOption {
	return guardOption(func(g *Guard) { g.onAsk = fn })
}

// WithFailOpen decides what a Guard does while the daemon is unreachable: run the tool unguarded
// (true, the default) or return the ErrUnavailable error (false).
func WithFailOpen(failOpen bool) GuardOption {
	return guardOption(func(g *Guard) { g.failOpen = failOpen })
}

// ------------------------------------------------------------------------------ event

// WithSessionID sets the event's session id, which the daemon carries into logs and inspection only.
func WithSessionID(sessionID string) EventOption {
	return eventOption(func(f *eventFields) { f.sessionID = sessionID })
}

// WithSeq overrides the client's own event numbering; the verdict echoes it.
func WithSeq(seq uint64) EventOption { return eventOption(func(f *eventFields) { f.seq = seq }) }

// WithToolCallID sets the tool call id that pairs a call with its outcome.
func WithToolCallID(id string) EventOption {
	return eventOption(func(f *eventFields) { f.toolCallID = id })
}

// WithBatchID marks a ToolCall as one of a batch: the calls of one run sharing a batch id were
// issued together (one model turn's parallel calls, at most 64). With loopwarden.parallelBatches,
// identical calls of one batch count once and a fan-out of distinct calls is not churn. Without
// it, the calls of one Evaluate request are a batch. Other events ignore it.
func WithBatchID(id string) EventOption {
	return eventOption(func(f *eventFields) { f.batchID = id })
}

// WithPromptID names the new prompt of a UserTurn (UserTurn.prompt_id: part of the event's
// content for retries). Other kinds ignore it.
func WithPromptID(id string) EventOption {
	return eventOption(func(f *eventFields) { f.promptID = id })
}

// WithToolClass tells the daemon what the called tool does, as the config spells a class:
// "readOnly", "mutating" or "poll" ("" = not said; loopwarden.toolRules in the config wins).
// ToolCallEvent returns an error for any other value. Other events ignore it.
func WithToolClass(class string) EventOption {
	return eventOption(func(f *eventFields) { f.toolClass = class })
}

// WithDuration reports in a ToolOutcome how long the tool ran (ToolOutcome.duration_ms, for
// loopwarden.budgets.toolSecondsPerTree). A Guard measures it itself. Other events ignore it.
func WithDuration(d time.Duration) EventOption {
	return eventOption(func(f *eventFields) {
		if d > 0 {
			f.durationMs = uint64(d.Milliseconds())
		}
	})
}

// WithParamsJSON sends the arguments verbatim instead of json.Marshal(params).
func WithParamsJSON(text string) EventOption {
	return eventOption(func(f *eventFields) { f.paramsJSON = &text })
}

// WithResult reports the value a tool returned (any JSON-marshalable value) in a ToolOutcome.
func WithResult(result any) EventOption {
	return eventOption(func(f *eventFields) { f.result, f.hasResult = result, true })
}

// WithResultJSON reports a tool's result verbatim (JSON text) in a ToolOutcome.
func WithResultJSON(text string) EventOption {
	return eventOption(func(f *eventFields) { f.resultJSON = &text })
}

// WithError reports in a ToolOutcome that the tool failed, with its error text; it wins over
// WithResult and WithResultJSON.
func WithError(text string) EventOption {
	return eventOption(func(f *eventFields) { f.errText = &text })
}
