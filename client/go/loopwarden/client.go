// Package loopwarden is the Go client of the loopwarden daemon: ask before each tool call, report
// each outcome, and let a Guard turn the daemon's verdicts into what a runner does.
//
//	client, err := loopwarden.New("127.0.0.1:50051")
//	verdict, err := client.ToolCall(ctx, "run-1", "read", map[string]any{"path": "/x"})
//	if verdict.MayRun() { ... }
//
// Callers work with the package's own Verdict type; the generated stubs live in
// github.com/loopwarden/loopwarden/client/go/loopwardenv1 for those who want the wire types.
package loopwarden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/loopwarden/loopwarden/client/go/loopwardenv1"
)

// DefaultTarget is where `loopwarden serve` listens unless told otherwise.
const DefaultTarget = "127.0.0.1:50051"

const maxMessageBytes = 8 * 1024 * 1024

// ErrUnavailable: the daemon could not be reached, or the stream broke; the next call reconnects.
var ErrUnavailable = errors.New("loopwarden unavailable")

// ErrRunNotFound: InspectRun found no state for that run on the daemon.
var ErrRunNotFound = errors.New("loopwarden: run not found")

// unavailable wraps the cause so errors.Is(err, ErrUnavailable) holds and the gRPC status survives.
type unavailable struct{ cause error }

func (e *unavailable) Error() string {
	if s, ok := status.FromError(e.cause); ok && e.cause != nil {
		return fmt.Sprintf("%v: %s: %s", ErrUnavailable, s.Code(), s.Message())
	}
	return fmt.Sprintf("%v: %v", ErrUnavailable, e.cause)
}
func (e *unavailable) Unwrap() []error { return []error{ErrUnavailable, e.cause} }

// RunAbortedError is returned by a Guard when the daemon aborts the run.
type RunAbortedError struct{ Verdict Verdict }

func (e *RunAbortedError) Error() string {
	if e.Verdict.Message != "" {
		return "loopwarden: run aborted: " + e.Verdict.Message
	}
	return "loopwarden: run aborted: " + e.Verdict.ErrorCode
}

// Option configures a Client.
type Option func(*Client)

// WithAgentID sets the agent id sent with every event that does not name one.
func WithAgentID(agentID string) Option { return func(c *Client) { c.agentID = agentID } }

// WithMetadata adds gRPC metadata (key, value pairs) to every call.
func WithMetadata(kv ...string) Option {
	return func(c *Client) { c.md = metadata.Join(c.md, metadata.Pairs(kv...)) }
}

// WithToken sends `authorization: Bearer <token>` on every call (the daemon's --auth-token-file).
func WithToken(token string) Option { return WithMetadata("authorization", "Bearer "+token) }

// WithTimeout sets the deadline of the unary calls (default 10 s).
func WithTimeout(timeout time.Duration) Option { return func(c *Client) { c.timeout = timeout } }

// WithDialOptions replaces the default dial options (insecure transport credentials: loopback or
// a sidecar); for TLS or mTLS pass grpc.WithTransportCredentials(credentials.NewTLS(...)).
func WithDialOptions(opts ...grpc.DialOption) Option { return func(c *Client) { c.dialOptions = opts } }

// Client holds one Evaluate stream open and reopens it after a failure; a run keeps its state on
// the daemon across streams. Safe for concurrent use: requests on the stream go one at a time.
type Client struct {
	conn        *grpc.ClientConn
	stub        pb.LoopDetectionServiceClient
	agentID     string
	md          metadata.MD
	timeout     time.Duration
	dialOptions []grpc.DialOption
	seq         atomic.Uint64

	mu     sync.Mutex // guards stream and cancel; held for one request/response pair
	stream grpc.BidiStreamingClient[pb.EvaluateRequest, pb.EvaluateResponse]
	cancel context.CancelFunc
}

// New connects lazily to a daemon (the first call dials).
func New(target string, opts ...Option) (*Client, error) {
	c := &Client{timeout: 10 * time.Second}
	for _, opt := range opts {
		opt(c)
	}
	if c.dialOptions == nil {
		c.dialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	dial := append([]grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes))}, c.dialOptions...)
	conn, err := grpc.NewClient(target, dial...)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	c.stub = pb.NewLoopDetectionServiceClient(conn)
	return c, nil
}

// Close ends the stream and the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	c.resetLocked()
	c.mu.Unlock()
	return c.conn.Close()
}

func (c *Client) outgoing(ctx context.Context) context.Context {
	if c.md == nil {
		return ctx
	}
	return metadata.NewOutgoingContext(ctx, c.md)
}

func (c *Client) resetLocked() {
	if c.cancel != nil {
		c.cancel()
	}
	c.stream, c.cancel = nil, nil
}

// Evaluate sends one request carrying several events and returns one verdict per event, in order.
// ctx bounds the wait for this answer; the stream itself lives until Close or a failure.
func (c *Client) Evaluate(ctx context.Context, events ...*pb.Event) ([]Verdict, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stream == nil {
		streamCtx, cancel := context.WithCancel(c.outgoing(context.Background()))
		stream, err := c.stub.Evaluate(streamCtx)
		if err != nil {
			cancel()
			return nil, &unavailable{err}
		}
		c.stream, c.cancel = stream, cancel
	}
	type answer struct {
		response *pb.EvaluateResponse
		err      error
	}
	done := make(chan answer, 1)
	stream := c.stream
	go func() {
		if err := stream.Send(&pb.EvaluateRequest{Events: events}); err != nil {
			// The real cause is on the receive side (io.EOF from Send means the stream ended).
			_, err = stream.Recv()
			done <- answer{nil, err}
			return
		}
		response, err := stream.Recv()
		done <- answer{response, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			c.resetLocked()
			if errors.Is(a.err, io.EOF) {
				return nil, &unavailable{errors.New("the daemon closed the stream")}
			}
			return nil, &unavailable{a.err}
		}
		verdicts := make([]Verdict, len(a.response.GetVerdicts()))
		for i, v := range a.response.GetVerdicts() {
			verdicts[i] = VerdictFromMessage(v)
		}
		return verdicts, nil
	case <-ctx.Done():
		// The answer would belong to this request; the next one must not read it: start afresh.
		c.resetLocked()
		<-done
		return nil, ctx.Err()
	}
}

func (c *Client) send(ctx context.Context, event *pb.Event, err error) (Verdict, error) {
	if err != nil {
		return Verdict{}, err
	}
	verdicts, err := c.Evaluate(ctx, event)
	if err != nil {
		return Verdict{}, err
	}
	return verdicts[0], nil
}

func (c *Client) complete(opts []EventOption) []EventOption {
	defaults := []EventOption{WithAgent(c.agentID), WithSeq(c.seq.Add(1))}
	return append(defaults, opts...)
}

// ToolCall asks before a tool runs: may it run? ALLOW or WARN: run it.
func (c *Client) ToolCall(ctx context.Context, runID, toolName string, params any, opts ...EventOption) (Verdict, error) {
	event, err := ToolCallEvent(runID, toolName, params, c.complete(opts)...)
	return c.send(ctx, event, err)
}

// ToolOutcome reports what a tool returned (WithResult, WithResultJSON) or its error (WithError).
func (c *Client) ToolOutcome(ctx context.Context, runID, toolName string, params any, opts ...EventOption) (Verdict, error) {
	event, err := ToolOutcomeEvent(runID, toolName, params, c.complete(opts)...)
	return c.send(ctx, event, err)
}

// CompactionRetry tells the daemon the runner compacted its context and retries: arms the guard.
func (c *Client) CompactionRetry(ctx context.Context, runID string, opts ...EventOption) (Verdict, error) {
	return c.send(ctx, CompactionRetryEvent(runID, c.complete(opts)...), nil)
}

// RunEnd tells the daemon the run is over: it frees the run's state.
func (c *Client) RunEnd(ctx context.Context, runID string, opts ...EventOption) (Verdict, error) {
	return c.send(ctx, RunEndEvent(runID, c.complete(opts)...), nil)
}

// Check is the unary Check RPC: the same decision for one event, without a stream.
func (c *Client) Check(ctx context.Context, event *pb.Event) (Verdict, error) {
	ctx, cancel := context.WithTimeout(c.outgoing(ctx), c.timeout)
	defer cancel()
	response, err := c.stub.Check(ctx, &pb.CheckRequest{Event: event})
	if err != nil {
		return Verdict{}, &unavailable{err}
	}
	return VerdictFromMessage(response.GetVerdict()), nil
}

// Inspect is the InspectRun RPC: a read-only view of one run; ErrRunNotFound for a run the
// daemon does not hold.
func (c *Client) Inspect(ctx context.Context, runID string) (RunInspection, error) {
	ctx, cancel := context.WithTimeout(c.outgoing(ctx), c.timeout)
	defer cancel()
	response, err := c.stub.InspectRun(ctx, &pb.InspectRunRequest{RunId: runID})
	if status.Code(err) == codes.NotFound {
		return RunInspection{}, fmt.Errorf("%w: %s", ErrRunNotFound, status.Convert(err).Message())
	}
	if err != nil {
		return RunInspection{}, &unavailable{err}
	}
	return inspectionFromMessage(response), nil
}

// ---------------------------------------------------------------------------------- events

type eventFields struct {
	agentID, sessionID, toolCallID  string
	seq                             uint64
	paramsJSON, resultJSON, errText *string
	result                          any
	hasResult                       bool
}

// EventOption sets an optional field of an event.
type EventOption func(*eventFields)

// WithAgent selects agents.list[id] of the daemon's config for this event.
func WithAgent(agentID string) EventOption { return func(f *eventFields) { f.agentID = agentID } }

// WithSession is carried into logs and inspection only.
func WithSession(sessionID string) EventOption {
	return func(f *eventFields) { f.sessionID = sessionID }
}

// WithSeq overrides the client's own event numbering.
func WithSeq(seq uint64) EventOption { return func(f *eventFields) { f.seq = seq } }

// WithToolCallID pairs a call with its outcome.
func WithToolCallID(id string) EventOption { return func(f *eventFields) { f.toolCallID = id } }

// WithParamsJSON sends the arguments verbatim instead of json.Marshal(params).
func WithParamsJSON(text string) EventOption { return func(f *eventFields) { f.paramsJSON = &text } }

// WithResult is the value a tool returned (any JSON-marshalable value).
func WithResult(result any) EventOption {
	return func(f *eventFields) { f.result, f.hasResult = result, true }
}

// WithResultJSON sends a tool's result verbatim.
func WithResultJSON(text string) EventOption { return func(f *eventFields) { f.resultJSON = &text } }

// WithError reports that the tool failed, with its error text.
func WithError(text string) EventOption { return func(f *eventFields) { f.errText = &text } }

func fields(opts []EventOption) eventFields {
	var f eventFields
	for _, opt := range opts {
		opt(&f)
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
	return &pb.Event{RunId: runID, AgentId: f.agentID, SessionId: f.sessionID, Seq: f.seq}
}

// ToolCallEvent builds the event sent before a tool runs.
func ToolCallEvent(runID, toolName string, params any, opts ...EventOption) (*pb.Event, error) {
	f := fields(opts)
	text, err := paramsText(params, f)
	if err != nil {
		return nil, err
	}
	event := envelope(runID, f)
	event.Kind = &pb.Event_ToolCall{ToolCall: &pb.ToolCall{ToolName: toolName, ToolCallId: f.toolCallID, ParamsJson: text}}
	return event, nil
}

// ToolOutcomeEvent builds the event sent after a tool ran.
func ToolOutcomeEvent(runID, toolName string, params any, opts ...EventOption) (*pb.Event, error) {
	f := fields(opts)
	text, err := paramsText(params, f)
	if err != nil {
		return nil, err
	}
	outcome := &pb.ToolOutcome{ToolName: toolName, ToolCallId: f.toolCallID, ParamsJson: text}
	switch {
	case f.errText != nil:
		outcome.Outcome = &pb.ToolOutcome_Error{Error: *f.errText}
	case f.resultJSON != nil:
		outcome.Outcome = &pb.ToolOutcome_ResultJson{ResultJson: *f.resultJSON}
	case f.hasResult:
		result, err := jsonText(f.result)
		if err != nil {
			return nil, err
		}
		outcome.Outcome = &pb.ToolOutcome_ResultJson{ResultJson: result}
	}
	event := envelope(runID, f)
	event.Kind = &pb.Event_ToolOutcome{ToolOutcome: outcome}
	return event, nil
}

// CompactionRetryEvent builds the event that arms the post-compaction guard.
func CompactionRetryEvent(runID string, opts ...EventOption) *pb.Event {
	event := envelope(runID, fields(opts))
	event.Kind = &pb.Event_CompactionRetry{CompactionRetry: &pb.CompactionRetry{}}
	return event
}

// RunEndEvent builds the event that frees a run's state.
func RunEndEvent(runID string, opts ...EventOption) *pb.Event {
	event := envelope(runID, fields(opts))
	event.Kind = &pb.Event_RunEnd{RunEnd: &pb.RunEnd{}}
	return event
}
