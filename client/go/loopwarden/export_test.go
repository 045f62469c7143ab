package loopwarden

// EventWithoutKind builds what no public builder does: an event of no kind, which the daemon
// rejects (missing_event_kind). The conformance scenarios send one.
func EventWithoutKind(runID string, opts ...EventOption) Event {
	return Event{envelope(runID, fields(opts))}
}

// VerdictFromMessage decodes a wire verdict as the client does: the guard-policy test builds the
// blocked result it expects to be reported from the verdict the Guard itself read.
var VerdictFromMessage = verdictFromMessage
