package loopwarden

import (
	"container/list"
	"context"
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

// RoutingHeader is the metadata header a router hashes to keep a run on one replica (nginx
// `hash $http_x_loopwarden_run_id consistent`, HAProxy `balance hdr(x-loopwarden-run-id)`, Envoy
// and Istio header hash policies, grpc-go's ring_hash). Check and Inspect always send it; so does
// every Evaluate stream in the per-run stream mode (WithPerRunStreams).
const RoutingHeader = "x-loopwarden-run-id"

// ErrUnavailable is matched (errors.Is) by the errors of calls that could not reach the daemon or
// whose stream broke; the next call reconnects. The gRPC status stays reachable: status.Code(err).
var ErrUnavailable = errors.New("loopwarden unavailable")

// ErrRunNotFound is matched (errors.Is) by the error of Inspect for a run the daemon holds no
// state for.
var ErrRunNotFound = errors.New("loopwarden: run not found")

// ErrExemptionNotFound is matched (errors.Is) by the error of RevokeExemption for an id the
// tenant holds no exemption of.
var ErrExemptionNotFound = errors.New("loopwarden: exemption not found")

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
type RunAbortedError struct {
	// Verdict is the ABORT verdict; its ErrorCode says why.
	Verdict Verdict
}

// Error says the run was aborted, with the verdict's message (or error code).
func (e *RunAbortedError) Error() string {
	if e.Verdict.Message != "" {
		return "loopwarden: run aborted: " + e.Verdict.Message
	}
	return "loopwarden: run aborted: " + e.Verdict.ErrorCode
}

// Client holds one Evaluate stream open and reopens it after a failure; a run keeps its state on
// the daemon across streams. Safe for concurrent use: requests on the stream go one at a time.
//
// With WithPerRunStreams (for several replicas behind a router) it holds one stream per run
// instead, opened with the RoutingHeader set to the run id, closed after the run's RunEnd, at most
// the given number open (least recently used closed first); a failed stream (closed for
// idleness, or its replica gone) is reopened and the request resent once, transparently: events
// carry a seq, so a resend the daemon already saw gets its first verdict.
//
// Run trees: an event with a parent run id (WithParentRunID) is of a child run (a sub-agent),
// which the daemon keeps with its tree, so the RoutingHeader names the tree's ROOT run: one stream
// per tree in the per-run mode. The client learns each child's root from the events it sends; a
// sub-agent whose parent this client never saw passes WithRootRunID.
type Client struct {
	conn        *grpc.ClientConn
	stub        pb.LoopDetectionServiceClient
	agentID     string
	acceptsAsk  bool
	trees       *runTrees
	md          metadata.MD
	timeout     time.Duration
	dialOptions []grpc.DialOption
	seq         atomic.Uint64
	target      string
	tracer      Tracer // WithTracer; nil: no tracing

	mu     sync.Mutex // guards the streams; held for one request/response pair
	stream grpc.BidiStreamingClient[pb.EvaluateRequest, pb.EvaluateResponse]
	cancel context.CancelFunc

	maxRunStreams int                      // > 0: per-run stream mode
	runStreams    map[string]*list.Element // run id -> element of runOrder (a *runStream)
	runOrder      *list.List               // least recently used first
}

type runStream struct {
	runID  string
	stream grpc.BidiStreamingClient[pb.EvaluateRequest, pb.EvaluateResponse]
	cancel context.CancelFunc
}

// New returns a client of the daemon at target (host:port, or any gRPC target), with insecure
// transport credentials unless WithDialOptions says otherwise. It connects lazily: the first call
// dials.
func New(target string, opts ...Option) (*Client, error) {
	c := &Client{timeout: 10 * time.Second, trees: newRunTrees(defaultTreeCapacity), target: target}
	for _, opt := range opts {
		opt.applyToClient(c)
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
	c.runStreams, c.runOrder = map[string]*list.Element{}, list.New()
	return c, nil
}

// Close ends the streams and the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	c.resetLocked()
	for runID := range c.runStreams {
		c.closeRunLocked(runID)
	}
	c.mu.Unlock()
	return c.conn.Close()
}

// routed is ctx with the client's metadata and the RoutingHeader for runID.
func (c *Client) routed(ctx context.Context, runID string) context.Context {
	ctx = c.outgoing(ctx)
	if id := strings.TrimSpace(runID); id != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, RoutingHeader, id)
	}
	return ctx
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

// Evaluate sends one request carrying several events (built by ToolCallEvent and the other event
// builders, sent as built) and returns one verdict per event, in order. ctx bounds the wait for
// this answer; the stream itself lives until Close or a failure.
func (c *Client) Evaluate(ctx context.Context, events ...Event) ([]Verdict, error) {
	messages := make([]*pb.Event, len(events))
	for i, event := range events {
		messages[i] = event.wire()
	}
	return c.traced(ctx, "Evaluate", messages, func(ctx context.Context, _ map[string]string) ([]Verdict, error) {
		return c.evaluate(ctx, messages)
	})
}

func (c *Client) evaluate(ctx context.Context, messages []*pb.Event) ([]Verdict, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxRunStreams > 0 {
		return c.evaluatePerRunLocked(ctx, messages)
	}
	if c.stream == nil {
		streamCtx, cancel := context.WithCancel(c.outgoing(context.Background()))
		stream, err := c.stub.Evaluate(streamCtx)
		if err != nil {
			cancel()
			return nil, &unavailable{err}
		}
		c.stream, c.cancel = stream, cancel
	}
	verdicts, err, broke := exchange(ctx, c.stream, messages)
	if broke {
		c.resetLocked()
	}
	return verdicts, err
}

// exchange sends one request on stream and waits for its answer; broke says the stream is unusable.
func exchange(ctx context.Context, stream grpc.BidiStreamingClient[pb.EvaluateRequest, pb.EvaluateResponse],
	messages []*pb.Event) ([]Verdict, error, bool) {
	type answer struct {
		response *pb.EvaluateResponse
		err      error
	}
	done := make(chan answer, 1)
	go func() {
		if err := stream.Send(&pb.EvaluateRequest{Events: messages}); err != nil {
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
			if errors.Is(a.err, io.EOF) {
				return nil, &unavailable{errors.New("the daemon closed the stream")}, true
			}
			return nil, &unavailable{a.err}, true
		}
		verdicts := make([]Verdict, len(a.response.GetVerdicts()))
		for i, v := range a.response.GetVerdicts() {
			verdicts[i] = verdictFromMessage(v)
		}
		return verdicts, nil, false
	case <-ctx.Done():
		// The answer would belong to this request; the next one must not read it: start afresh.
		return nil, ctx.Err(), true
	}
}

// evaluatePerRunLocked sends each run tree's events on the stream of its root; verdicts keep
// event order.
func (c *Client) evaluatePerRunLocked(ctx context.Context, messages []*pb.Event) ([]Verdict, error) {
	verdicts := make([]Verdict, len(messages))
	var order []string
	groups := map[string][]int{}
	for i, message := range messages {
		root := c.trees.learn(message.GetRunId(), message.GetParentRunId(), "")
		if _, seen := groups[root]; !seen {
			order = append(order, root)
		}
		groups[root] = append(groups[root], i)
	}
	for _, root := range order {
		positions := groups[root]
		batch := make([]*pb.Event, len(positions))
		ends := false // a child's end cannot close its tree's stream; the root's can
		for k, i := range positions {
			batch[k] = messages[i]
			ends = ends || (messages[i].GetRunEnd() != nil && strings.TrimSpace(messages[i].GetRunId()) == root)
		}
		answers, err := c.runRequestLocked(ctx, root, batch)
		if err != nil {
			return nil, err
		}
		for k, i := range positions {
			verdicts[i] = answers[k]
			if messages[i].GetRunEnd() != nil {
				c.trees.forget(messages[i].GetRunId())
			}
		}
		if ends {
			c.closeRunLocked(root)
		}
	}
	return verdicts, nil
}

func (c *Client) runRequestLocked(ctx context.Context, runID string, batch []*pb.Event) ([]Verdict, error) {
	for attempt := 1; ; attempt++ {
		element, ok := c.runStreams[runID]
		if !ok {
			if c.runOrder.Len() >= c.maxRunStreams {
				c.closeRunLocked(c.runOrder.Front().Value.(*runStream).runID)
			}
			streamCtx, cancel := context.WithCancel(c.routed(context.Background(), runID))
			stream, err := c.stub.Evaluate(streamCtx)
			if err != nil {
				cancel()
				return nil, &unavailable{err}
			}
			element = c.runOrder.PushBack(&runStream{runID, stream, cancel})
			c.runStreams[runID] = element
		}
		c.runOrder.MoveToBack(element)
		verdicts, err, broke := exchange(ctx, element.Value.(*runStream).stream, batch)
		if broke {
			c.closeRunLocked(runID)
		}
		if err == nil || attempt >= 2 || ctx.Err() != nil {
			return verdicts, err
		}
	}
}

func (c *Client) closeRunLocked(runID string) {
	element, ok := c.runStreams[runID]
	if !ok {
		return
	}
	delete(c.runStreams, runID)
	c.runOrder.Remove(element)
	element.Value.(*runStream).cancel()
}

func (c *Client) send(ctx context.Context, event Event, err error) (Verdict, error) {
	if err != nil {
		return Verdict{}, err
	}
	verdicts, err := c.Evaluate(ctx, event)
	if err != nil {
		return Verdict{}, err
	}
	return verdicts[0], nil
}

// complete puts the client's defaults before opts, and learns the event's place in its run tree.
func (c *Client) complete(runID string, opts []EventOption) []EventOption {
	defaults := []EventOption{WithAgentID(c.agentID), WithSeq(c.seq.Add(1)), WithAcceptsAsk(c.acceptsAsk)}
	f := fields(opts)
	c.trees.learn(runID, f.parentRunID, f.rootRunID)
	return append(defaults, opts...)
}

// RootOf is the root of runID's tree as far as the client knows: what its RoutingHeader names.
func (c *Client) RootOf(runID string) string { return c.trees.root(runID) }

// ToolCall asks before a tool runs whether it may run (Verdict.MayRun: ALLOW or WARN). The event
// carries the client's agent id and next seq unless opts set them.
func (c *Client) ToolCall(ctx context.Context, runID, toolName string, params any, opts ...EventOption) (Verdict, error) {
	event, err := ToolCallEvent(runID, toolName, params, c.complete(runID, opts)...)
	return c.send(ctx, event, err)
}

// ToolOutcome reports what a tool returned (WithResult, WithResultJSON) or its error (WithError),
// with the params it was called with.
func (c *Client) ToolOutcome(ctx context.Context, runID, toolName string, params any, opts ...EventOption) (Verdict, error) {
	event, err := ToolOutcomeEvent(runID, toolName, params, c.complete(runID, opts)...)
	return c.send(ctx, event, err)
}

// CompactionRetry tells the daemon the runner compacted its context and retries, which arms the
// post-compaction guard.
func (c *Client) CompactionRetry(ctx context.Context, runID string, opts ...EventOption) (Verdict, error) {
	return c.send(ctx, CompactionRetryEvent(runID, c.complete(runID, opts)...), nil)
}

// UserTurn tells the daemon a person or an orchestrator sent the run a new instruction
// (WithPromptID names it): the run starts fresh for loop detection, unless
// loopwarden.userTurnResets is false, and keeps its budgets; an aborted run stays aborted.
func (c *Client) UserTurn(ctx context.Context, runID string, opts ...EventOption) (Verdict, error) {
	return c.send(ctx, UserTurnEvent(runID, c.complete(runID, opts)...), nil)
}

// Usage reports what one model response cost (tokens, US dollars), for the tree's token and
// cost budgets.
func (c *Client) Usage(ctx context.Context, runID string, usage Usage, opts ...EventOption) (Verdict, error) {
	return c.send(ctx, UsageEvent(runID, usage, c.complete(runID, opts)...), nil)
}

// ModelOutput reports what the model said (see ModelOutput): ALLOW, WARN (show the message) or
// ABORT (end the run); an error before anything is sent for an unknown kind.
func (c *Client) ModelOutput(ctx context.Context, runID string, output ModelOutput, opts ...EventOption) (Verdict, error) {
	event, err := ModelOutputEvent(runID, output, c.complete(runID, opts)...)
	return c.send(ctx, event, err)
}

// Approval reports a human's answer to an ActionAsk verdict (see Approval); an error before
// anything is sent for an approval that names no call or has an unknown scope.
func (c *Client) Approval(ctx context.Context, runID string, approval Approval, opts ...EventOption) (Verdict, error) {
	if _, err := ApprovalEvent(runID, approval); err != nil {
		return Verdict{}, err
	}
	event, err := ApprovalEvent(runID, approval, c.complete(runID, opts)...)
	return c.send(ctx, event, err)
}

// RunEnd tells the daemon the run is over: it frees the run's state.
func (c *Client) RunEnd(ctx context.Context, runID string, opts ...EventOption) (Verdict, error) {
	return c.send(ctx, RunEndEvent(runID, c.complete(runID, opts)...), nil)
}

// Check is the unary Check RPC: the same decision as Evaluate for one event (sent as built),
// without a stream, bounded by ctx and by the client's timeout (WithTimeout).
func (c *Client) Check(ctx context.Context, event Event) (Verdict, error) {
	message := event.wire()
	verdicts, err := c.traced(ctx, "Check", []*pb.Event{message},
		func(ctx context.Context, headers map[string]string) ([]Verdict, error) {
			root := c.trees.learn(message.GetRunId(), message.GetParentRunId(), "")
			ctx, cancel := context.WithTimeout(withHeaders(c.routed(ctx, root), headers), c.timeout)
			defer cancel()
			response, err := c.stub.Check(ctx, &pb.CheckRequest{Event: message})
			if err != nil {
				return nil, &unavailable{err}
			}
			return []Verdict{verdictFromMessage(response.GetVerdict())}, nil
		})
	if err != nil {
		return Verdict{}, err
	}
	return verdicts[0], nil
}

// Inspect is the InspectRun RPC: a read-only view of one run; an ErrRunNotFound error for a run
// the daemon does not hold.
func (c *Client) Inspect(ctx context.Context, runID string) (RunInspection, error) {
	ctx, cancel := context.WithTimeout(c.routed(ctx, c.trees.root(runID)), c.timeout)
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

// ExemptionFilter narrows ListExemptions; the zero filter lists them all.
type ExemptionFilter struct {
	// AgentID keeps the exemptions of one agent.
	AgentID string
	// ToolName keeps the exemptions of one tool.
	ToolName string
}

// ListExemptions is the ListExemptions RPC: the tenant's standing approvals ("always" answers to
// an ASK), newest first.
func (c *Client) ListExemptions(ctx context.Context, filter ExemptionFilter) ([]Exemption, error) {
	ctx, cancel := context.WithTimeout(c.outgoing(ctx), c.timeout)
	defer cancel()
	response, err := c.stub.ListExemptions(ctx, &pb.ListExemptionsRequest{AgentId: filter.AgentID, ToolName: filter.ToolName})
	if err != nil {
		return nil, &unavailable{err}
	}
	return exemptionsFromMessages(response.GetExemptions()), nil
}

// RevokeExemption is the RevokeExemption RPC: it withdraws one standing approval, so the next
// matching critical is asked (or blocked) again, and returns it; an ErrExemptionNotFound error for
// an id the tenant does not hold.
func (c *Client) RevokeExemption(ctx context.Context, id string) (Exemption, error) {
	ctx, cancel := context.WithTimeout(c.outgoing(ctx), c.timeout)
	defer cancel()
	response, err := c.stub.RevokeExemption(ctx, &pb.RevokeExemptionRequest{Id: id})
	if status.Code(err) == codes.NotFound {
		return Exemption{}, fmt.Errorf("%w: %s", ErrExemptionNotFound, status.Convert(err).Message())
	}
	if err != nil {
		return Exemption{}, &unavailable{err}
	}
	return exemptionFromMessage(response.GetRevoked()), nil
}
