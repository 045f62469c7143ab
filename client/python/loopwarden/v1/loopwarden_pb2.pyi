from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_CLASS_UNSPECIFIED: _ClassVar[ToolClass]
    TOOL_CLASS_READ_ONLY: _ClassVar[ToolClass]
    TOOL_CLASS_MUTATING: _ClassVar[ToolClass]
    TOOL_CLASS_POLL: _ClassVar[ToolClass]

class OutputKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTPUT_KIND_UNSPECIFIED: _ClassVar[OutputKind]
    OUTPUT_KIND_MESSAGE: _ClassVar[OutputKind]
    OUTPUT_KIND_THOUGHT: _ClassVar[OutputKind]
    OUTPUT_KIND_FINAL_ANSWER: _ClassVar[OutputKind]

class ApprovalScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_SCOPE_UNSPECIFIED: _ClassVar[ApprovalScope]
    APPROVAL_SCOPE_ONCE: _ClassVar[ApprovalScope]
    APPROVAL_SCOPE_ALWAYS: _ClassVar[ApprovalScope]

class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACTION_UNSPECIFIED: _ClassVar[Action]
    ACTION_ALLOW: _ClassVar[Action]
    ACTION_WARN: _ClassVar[Action]
    ACTION_BLOCK: _ClassVar[Action]
    ACTION_ABORT: _ClassVar[Action]
    ACTION_REJECT: _ClassVar[Action]
    ACTION_ASK: _ClassVar[Action]

class Detector(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DETECTOR_UNSPECIFIED: _ClassVar[Detector]
    DETECTOR_GENERIC_REPEAT: _ClassVar[Detector]
    DETECTOR_KNOWN_POLL_NO_PROGRESS: _ClassVar[Detector]
    DETECTOR_PING_PONG: _ClassVar[Detector]
    DETECTOR_UNKNOWN_TOOL_REPEAT: _ClassVar[Detector]
    DETECTOR_GLOBAL_CIRCUIT_BREAKER: _ClassVar[Detector]
    DETECTOR_POST_COMPACTION_GUARD: _ClassVar[Detector]
    DETECTOR_RUN_WIDE_NO_PROGRESS: _ClassVar[Detector]
    DETECTOR_ARGUMENT_CHURN: _ClassVar[Detector]
    DETECTOR_ERROR_REPEAT: _ClassVar[Detector]
    DETECTOR_CYCLE: _ClassVar[Detector]
    DETECTOR_DUPLICATE_SIDE_EFFECT: _ClassVar[Detector]
    DETECTOR_FAILURE_CASCADE: _ClassVar[Detector]
    DETECTOR_CHILD_STOPPED: _ClassVar[Detector]
    DETECTOR_BUDGET: _ClassVar[Detector]
    DETECTOR_REPEATED_OUTPUT: _ClassVar[Detector]
    DETECTOR_COMPACTION_STORM: _ClassVar[Detector]
    DETECTOR_STOP_CONTINUATION: _ClassVar[Detector]
    DETECTOR_REPEATED_FINAL_ANSWER: _ClassVar[Detector]

class Level(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEVEL_UNSPECIFIED: _ClassVar[Level]
    LEVEL_WARNING: _ClassVar[Level]
    LEVEL_CRITICAL: _ClassVar[Level]
TOOL_CLASS_UNSPECIFIED: ToolClass
TOOL_CLASS_READ_ONLY: ToolClass
TOOL_CLASS_MUTATING: ToolClass
TOOL_CLASS_POLL: ToolClass
OUTPUT_KIND_UNSPECIFIED: OutputKind
OUTPUT_KIND_MESSAGE: OutputKind
OUTPUT_KIND_THOUGHT: OutputKind
OUTPUT_KIND_FINAL_ANSWER: OutputKind
APPROVAL_SCOPE_UNSPECIFIED: ApprovalScope
APPROVAL_SCOPE_ONCE: ApprovalScope
APPROVAL_SCOPE_ALWAYS: ApprovalScope
ACTION_UNSPECIFIED: Action
ACTION_ALLOW: Action
ACTION_WARN: Action
ACTION_BLOCK: Action
ACTION_ABORT: Action
ACTION_REJECT: Action
ACTION_ASK: Action
DETECTOR_UNSPECIFIED: Detector
DETECTOR_GENERIC_REPEAT: Detector
DETECTOR_KNOWN_POLL_NO_PROGRESS: Detector
DETECTOR_PING_PONG: Detector
DETECTOR_UNKNOWN_TOOL_REPEAT: Detector
DETECTOR_GLOBAL_CIRCUIT_BREAKER: Detector
DETECTOR_POST_COMPACTION_GUARD: Detector
DETECTOR_RUN_WIDE_NO_PROGRESS: Detector
DETECTOR_ARGUMENT_CHURN: Detector
DETECTOR_ERROR_REPEAT: Detector
DETECTOR_CYCLE: Detector
DETECTOR_DUPLICATE_SIDE_EFFECT: Detector
DETECTOR_FAILURE_CASCADE: Detector
DETECTOR_CHILD_STOPPED: Detector
DETECTOR_BUDGET: Detector
DETECTOR_REPEATED_OUTPUT: Detector
DETECTOR_COMPACTION_STORM: Detector
DETECTOR_STOP_CONTINUATION: Detector
DETECTOR_REPEATED_FINAL_ANSWER: Detector
LEVEL_UNSPECIFIED: Level
LEVEL_WARNING: Level
LEVEL_CRITICAL: Level

class EvaluateRequest(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class EvaluateResponse(_message.Message):
    __slots__ = ("verdicts",)
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    verdicts: _containers.RepeatedCompositeFieldContainer[Verdict]
    def __init__(self, verdicts: _Optional[_Iterable[_Union[Verdict, _Mapping]]] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: Event
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ("verdict",)
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    verdict: Verdict
    def __init__(self, verdict: _Optional[_Union[Verdict, _Mapping]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("run_id", "agent_id", "session_id", "seq", "parent_run_id", "accepts_ask", "tool_call", "tool_outcome", "compaction_retry", "run_end", "user_turn", "usage", "approval", "model_output")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTS_ASK_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_RETRY_FIELD_NUMBER: _ClassVar[int]
    RUN_END_FIELD_NUMBER: _ClassVar[int]
    USER_TURN_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    MODEL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    agent_id: str
    session_id: str
    seq: int
    parent_run_id: str
    accepts_ask: bool
    tool_call: ToolCall
    tool_outcome: ToolOutcome
    compaction_retry: CompactionRetry
    run_end: RunEnd
    user_turn: UserTurn
    usage: Usage
    approval: Approval
    model_output: ModelOutput
    def __init__(self, run_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., session_id: _Optional[str] = ..., seq: _Optional[int] = ..., parent_run_id: _Optional[str] = ..., accepts_ask: _Optional[bool] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., tool_outcome: _Optional[_Union[ToolOutcome, _Mapping]] = ..., compaction_retry: _Optional[_Union[CompactionRetry, _Mapping]] = ..., run_end: _Optional[_Union[RunEnd, _Mapping]] = ..., user_turn: _Optional[_Union[UserTurn, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., approval: _Optional[_Union[Approval, _Mapping]] = ..., model_output: _Optional[_Union[ModelOutput, _Mapping]] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("tool_name", "tool_call_id", "params_json", "tool_class", "batch_id")
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    TOOL_CLASS_FIELD_NUMBER: _ClassVar[int]
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    tool_name: str
    tool_call_id: str
    params_json: str
    tool_class: ToolClass
    batch_id: str
    def __init__(self, tool_name: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., params_json: _Optional[str] = ..., tool_class: _Optional[_Union[ToolClass, str]] = ..., batch_id: _Optional[str] = ...) -> None: ...

class ToolOutcome(_message.Message):
    __slots__ = ("tool_name", "tool_call_id", "params_json", "result_json", "error", "duration_ms")
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    tool_name: str
    tool_call_id: str
    params_json: str
    result_json: str
    error: str
    duration_ms: int
    def __init__(self, tool_name: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., params_json: _Optional[str] = ..., result_json: _Optional[str] = ..., error: _Optional[str] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class CompactionRetry(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunEnd(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class UserTurn(_message.Message):
    __slots__ = ("prompt_id",)
    PROMPT_ID_FIELD_NUMBER: _ClassVar[int]
    prompt_id: str
    def __init__(self, prompt_id: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cost_usd", "model")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cost_usd: float
    model: str
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., model: _Optional[str] = ...) -> None: ...

class ModelOutput(_message.Message):
    __slots__ = ("text", "text_digest", "output_kind", "usage", "stop_hook_active")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TEXT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_KIND_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STOP_HOOK_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    text: str
    text_digest: str
    output_kind: OutputKind
    usage: Usage
    stop_hook_active: bool
    def __init__(self, text: _Optional[str] = ..., text_digest: _Optional[str] = ..., output_kind: _Optional[_Union[OutputKind, str]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., stop_hook_active: _Optional[bool] = ...) -> None: ...

class Approval(_message.Message):
    __slots__ = ("tool_call_id", "decision_id", "approved", "scope", "ttl_seconds")
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    tool_call_id: str
    decision_id: str
    approved: bool
    scope: ApprovalScope
    ttl_seconds: int
    def __init__(self, tool_call_id: _Optional[str] = ..., decision_id: _Optional[str] = ..., approved: _Optional[bool] = ..., scope: _Optional[_Union[ApprovalScope, str]] = ..., ttl_seconds: _Optional[int] = ...) -> None: ...

class Verdict(_message.Message):
    __slots__ = ("seq", "run_id", "action", "detector", "level", "count", "message", "warning_key", "announce", "paired_tool_name", "error_code", "tool_name", "evidence", "decision_id", "shadow", "shadow_action")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DETECTOR_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    WARNING_KEY_FIELD_NUMBER: _ClassVar[int]
    ANNOUNCE_FIELD_NUMBER: _ClassVar[int]
    PAIRED_TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    SHADOW_FIELD_NUMBER: _ClassVar[int]
    SHADOW_ACTION_FIELD_NUMBER: _ClassVar[int]
    seq: int
    run_id: str
    action: Action
    detector: Detector
    level: Level
    count: int
    message: str
    warning_key: str
    announce: bool
    paired_tool_name: str
    error_code: str
    tool_name: str
    evidence: Evidence
    decision_id: str
    shadow: bool
    shadow_action: Action
    def __init__(self, seq: _Optional[int] = ..., run_id: _Optional[str] = ..., action: _Optional[_Union[Action, str]] = ..., detector: _Optional[_Union[Detector, str]] = ..., level: _Optional[_Union[Level, str]] = ..., count: _Optional[int] = ..., message: _Optional[str] = ..., warning_key: _Optional[str] = ..., announce: _Optional[bool] = ..., paired_tool_name: _Optional[str] = ..., error_code: _Optional[str] = ..., tool_name: _Optional[str] = ..., evidence: _Optional[_Union[Evidence, _Mapping]] = ..., decision_id: _Optional[str] = ..., shadow: _Optional[bool] = ..., shadow_action: _Optional[_Union[Action, str]] = ...) -> None: ...

class Evidence(_message.Message):
    __slots__ = ("seqs", "tool_call_ids", "loop_started_seq")
    SEQS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_IDS_FIELD_NUMBER: _ClassVar[int]
    LOOP_STARTED_SEQ_FIELD_NUMBER: _ClassVar[int]
    seqs: _containers.RepeatedScalarFieldContainer[int]
    tool_call_ids: _containers.RepeatedScalarFieldContainer[str]
    loop_started_seq: int
    def __init__(self, seqs: _Optional[_Iterable[int]] = ..., tool_call_ids: _Optional[_Iterable[str]] = ..., loop_started_seq: _Optional[int] = ...) -> None: ...

class InspectRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class InspectRunResponse(_message.Message):
    __slots__ = ("run_id", "agent_id", "records", "guard", "blocks", "aborted", "abort_error_code", "effective_config", "events_evaluated", "recent_verdicts", "agent_label", "parent_run_id", "children", "root_run_id", "depth", "tree_totals", "run_totals", "exemptions", "output_streaks")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    GUARD_FIELD_NUMBER: _ClassVar[int]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    ABORT_ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    EVENTS_EVALUATED_FIELD_NUMBER: _ClassVar[int]
    RECENT_VERDICTS_FIELD_NUMBER: _ClassVar[int]
    AGENT_LABEL_FIELD_NUMBER: _ClassVar[int]
    PARENT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    ROOT_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    TREE_TOTALS_FIELD_NUMBER: _ClassVar[int]
    RUN_TOTALS_FIELD_NUMBER: _ClassVar[int]
    EXEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_STREAKS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    agent_id: str
    records: _containers.RepeatedCompositeFieldContainer[RunRecord]
    guard: GuardState
    blocks: int
    aborted: bool
    abort_error_code: str
    effective_config: EffectiveConfig
    events_evaluated: int
    recent_verdicts: _containers.RepeatedCompositeFieldContainer[Verdict]
    agent_label: str
    parent_run_id: str
    children: _containers.RepeatedScalarFieldContainer[str]
    root_run_id: str
    depth: int
    tree_totals: Totals
    run_totals: Totals
    exemptions: _containers.RepeatedCompositeFieldContainer[Exemption]
    output_streaks: OutputStreaks
    def __init__(self, run_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., records: _Optional[_Iterable[_Union[RunRecord, _Mapping]]] = ..., guard: _Optional[_Union[GuardState, _Mapping]] = ..., blocks: _Optional[int] = ..., aborted: _Optional[bool] = ..., abort_error_code: _Optional[str] = ..., effective_config: _Optional[_Union[EffectiveConfig, _Mapping]] = ..., events_evaluated: _Optional[int] = ..., recent_verdicts: _Optional[_Iterable[_Union[Verdict, _Mapping]]] = ..., agent_label: _Optional[str] = ..., parent_run_id: _Optional[str] = ..., children: _Optional[_Iterable[str]] = ..., root_run_id: _Optional[str] = ..., depth: _Optional[int] = ..., tree_totals: _Optional[_Union[Totals, _Mapping]] = ..., run_totals: _Optional[_Union[Totals, _Mapping]] = ..., exemptions: _Optional[_Iterable[_Union[Exemption, _Mapping]]] = ..., output_streaks: _Optional[_Union[OutputStreaks, _Mapping]] = ...) -> None: ...

class OutputStreaks(_message.Message):
    __slots__ = ("messages", "thoughts", "final_answers", "compactions", "stop_continuations", "final_answer_turns")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    THOUGHTS_FIELD_NUMBER: _ClassVar[int]
    FINAL_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    COMPACTIONS_FIELD_NUMBER: _ClassVar[int]
    STOP_CONTINUATIONS_FIELD_NUMBER: _ClassVar[int]
    FINAL_ANSWER_TURNS_FIELD_NUMBER: _ClassVar[int]
    messages: int
    thoughts: int
    final_answers: int
    compactions: int
    stop_continuations: int
    final_answer_turns: int
    def __init__(self, messages: _Optional[int] = ..., thoughts: _Optional[int] = ..., final_answers: _Optional[int] = ..., compactions: _Optional[int] = ..., stop_continuations: _Optional[int] = ..., final_answer_turns: _Optional[int] = ...) -> None: ...

class Totals(_message.Message):
    __slots__ = ("tool_calls", "tool_ms", "input_tokens", "output_tokens", "cost_usd", "wall_seconds", "runs")
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_MS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    WALL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    tool_calls: int
    tool_ms: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    wall_seconds: float
    runs: int
    def __init__(self, tool_calls: _Optional[int] = ..., tool_ms: _Optional[int] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., wall_seconds: _Optional[float] = ..., runs: _Optional[int] = ...) -> None: ...

class Exemption(_message.Message):
    __slots__ = ("id", "agent_id", "tool_name", "args_hash", "created_at", "expires_at", "run_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_HASH_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    agent_id: str
    tool_name: str
    args_hash: str
    created_at: float
    expires_at: float
    run_id: str
    def __init__(self, id: _Optional[str] = ..., agent_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., args_hash: _Optional[str] = ..., created_at: _Optional[float] = ..., expires_at: _Optional[float] = ..., run_id: _Optional[str] = ...) -> None: ...

class ListExemptionsRequest(_message.Message):
    __slots__ = ("agent_id", "tool_name")
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    tool_name: str
    def __init__(self, agent_id: _Optional[str] = ..., tool_name: _Optional[str] = ...) -> None: ...

class ListExemptionsResponse(_message.Message):
    __slots__ = ("exemptions",)
    EXEMPTIONS_FIELD_NUMBER: _ClassVar[int]
    exemptions: _containers.RepeatedCompositeFieldContainer[Exemption]
    def __init__(self, exemptions: _Optional[_Iterable[_Union[Exemption, _Mapping]]] = ...) -> None: ...

class RevokeExemptionRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class RevokeExemptionResponse(_message.Message):
    __slots__ = ("revoked",)
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: Exemption
    def __init__(self, revoked: _Optional[_Union[Exemption, _Mapping]] = ...) -> None: ...

class RunRecord(_message.Message):
    __slots__ = ("seq", "tool_name", "args_hash", "tool_call_id", "result_hash", "unknown_tool_name")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_HASH_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_HASH_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    seq: int
    tool_name: str
    args_hash: str
    tool_call_id: str
    result_hash: str
    unknown_tool_name: str
    def __init__(self, seq: _Optional[int] = ..., tool_name: _Optional[str] = ..., args_hash: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., result_hash: _Optional[str] = ..., unknown_tool_name: _Optional[str] = ...) -> None: ...

class GuardState(_message.Message):
    __slots__ = ("armed", "window_size", "observed")
    ARMED_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SIZE_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_FIELD_NUMBER: _ClassVar[int]
    armed: bool
    window_size: int
    observed: int
    def __init__(self, armed: _Optional[bool] = ..., window_size: _Optional[int] = ..., observed: _Optional[int] = ...) -> None: ...

class ToolRule(_message.Message):
    __slots__ = ("tool", "tool_class", "ignore_args", "keep_args", "ignore_result")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    TOOL_CLASS_FIELD_NUMBER: _ClassVar[int]
    IGNORE_ARGS_FIELD_NUMBER: _ClassVar[int]
    KEEP_ARGS_FIELD_NUMBER: _ClassVar[int]
    IGNORE_RESULT_FIELD_NUMBER: _ClassVar[int]
    tool: str
    tool_class: ToolClass
    ignore_args: _containers.RepeatedScalarFieldContainer[str]
    keep_args: _containers.RepeatedScalarFieldContainer[str]
    ignore_result: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tool: _Optional[str] = ..., tool_class: _Optional[_Union[ToolClass, str]] = ..., ignore_args: _Optional[_Iterable[str]] = ..., keep_args: _Optional[_Iterable[str]] = ..., ignore_result: _Optional[_Iterable[str]] = ...) -> None: ...

class EffectiveConfig(_message.Message):
    __slots__ = ("enabled", "history_size", "warning_threshold", "critical_threshold", "unknown_tool_threshold", "global_circuit_breaker_threshold", "generic_repeat", "known_poll_no_progress", "ping_pong", "post_compaction_window_size", "abort_after_blocks", "run_wide_breaker_threshold", "shadow_mode", "argument_churn_warn_at", "argument_churn_block_at", "error_repeat_threshold", "preset", "ping_pong_needs_answers", "same_outcome_block_at", "same_outcome_inconclusive_block_at", "duplicate_side_effect", "tool_rules", "cycle_warn_after", "cycle_block_after", "exec_failure_streak", "failure_cascade_threshold", "parallel_batches", "critical_scope", "progress_resets_repeats", "user_turn_resets", "run_tree_max_depth", "run_tree_max_children", "budget_tool_calls_per_run", "budget_tool_calls_per_tree", "budget_tool_seconds_per_tree", "budget_tokens_per_tree", "budget_cost_usd_per_tree", "budget_wall_seconds_per_tree", "budget_warn_at", "on_budget", "on_critical", "ask_timeout_seconds", "exemption_ttl_seconds", "repeated_output_warn_at", "repeated_output_abort_at", "repeated_output_chunk_chars", "repeated_output_chunk_repeats", "compaction_storm_abort_at", "stop_continuation_abort_at", "repeated_final_answer_warn_at", "repeated_final_answer_abort_at")
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    HISTORY_SIZE_FIELD_NUMBER: _ClassVar[int]
    WARNING_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CRITICAL_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_TOOL_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_CIRCUIT_BREAKER_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    GENERIC_REPEAT_FIELD_NUMBER: _ClassVar[int]
    KNOWN_POLL_NO_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PING_PONG_FIELD_NUMBER: _ClassVar[int]
    POST_COMPACTION_WINDOW_SIZE_FIELD_NUMBER: _ClassVar[int]
    ABORT_AFTER_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    RUN_WIDE_BREAKER_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    SHADOW_MODE_FIELD_NUMBER: _ClassVar[int]
    ARGUMENT_CHURN_WARN_AT_FIELD_NUMBER: _ClassVar[int]
    ARGUMENT_CHURN_BLOCK_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_REPEAT_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    PRESET_FIELD_NUMBER: _ClassVar[int]
    PING_PONG_NEEDS_ANSWERS_FIELD_NUMBER: _ClassVar[int]
    SAME_OUTCOME_BLOCK_AT_FIELD_NUMBER: _ClassVar[int]
    SAME_OUTCOME_INCONCLUSIVE_BLOCK_AT_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_SIDE_EFFECT_FIELD_NUMBER: _ClassVar[int]
    TOOL_RULES_FIELD_NUMBER: _ClassVar[int]
    CYCLE_WARN_AFTER_FIELD_NUMBER: _ClassVar[int]
    CYCLE_BLOCK_AFTER_FIELD_NUMBER: _ClassVar[int]
    EXEC_FAILURE_STREAK_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CASCADE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    CRITICAL_SCOPE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_RESETS_REPEATS_FIELD_NUMBER: _ClassVar[int]
    USER_TURN_RESETS_FIELD_NUMBER: _ClassVar[int]
    RUN_TREE_MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    RUN_TREE_MAX_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOOL_CALLS_PER_RUN_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOOL_CALLS_PER_TREE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOOL_SECONDS_PER_TREE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_PER_TREE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_COST_USD_PER_TREE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_WALL_SECONDS_PER_TREE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_WARN_AT_FIELD_NUMBER: _ClassVar[int]
    ON_BUDGET_FIELD_NUMBER: _ClassVar[int]
    ON_CRITICAL_FIELD_NUMBER: _ClassVar[int]
    ASK_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXEMPTION_TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REPEATED_OUTPUT_WARN_AT_FIELD_NUMBER: _ClassVar[int]
    REPEATED_OUTPUT_ABORT_AT_FIELD_NUMBER: _ClassVar[int]
    REPEATED_OUTPUT_CHUNK_CHARS_FIELD_NUMBER: _ClassVar[int]
    REPEATED_OUTPUT_CHUNK_REPEATS_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_STORM_ABORT_AT_FIELD_NUMBER: _ClassVar[int]
    STOP_CONTINUATION_ABORT_AT_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FINAL_ANSWER_WARN_AT_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FINAL_ANSWER_ABORT_AT_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    history_size: int
    warning_threshold: int
    critical_threshold: int
    unknown_tool_threshold: int
    global_circuit_breaker_threshold: int
    generic_repeat: bool
    known_poll_no_progress: bool
    ping_pong: bool
    post_compaction_window_size: int
    abort_after_blocks: int
    run_wide_breaker_threshold: int
    shadow_mode: bool
    argument_churn_warn_at: int
    argument_churn_block_at: int
    error_repeat_threshold: int
    preset: str
    ping_pong_needs_answers: bool
    same_outcome_block_at: int
    same_outcome_inconclusive_block_at: int
    duplicate_side_effect: bool
    tool_rules: _containers.RepeatedCompositeFieldContainer[ToolRule]
    cycle_warn_after: int
    cycle_block_after: int
    exec_failure_streak: bool
    failure_cascade_threshold: int
    parallel_batches: bool
    critical_scope: str
    progress_resets_repeats: bool
    user_turn_resets: bool
    run_tree_max_depth: int
    run_tree_max_children: int
    budget_tool_calls_per_run: int
    budget_tool_calls_per_tree: int
    budget_tool_seconds_per_tree: int
    budget_tokens_per_tree: int
    budget_cost_usd_per_tree: float
    budget_wall_seconds_per_tree: int
    budget_warn_at: float
    on_budget: str
    on_critical: str
    ask_timeout_seconds: int
    exemption_ttl_seconds: int
    repeated_output_warn_at: int
    repeated_output_abort_at: int
    repeated_output_chunk_chars: int
    repeated_output_chunk_repeats: int
    compaction_storm_abort_at: int
    stop_continuation_abort_at: int
    repeated_final_answer_warn_at: int
    repeated_final_answer_abort_at: int
    def __init__(self, enabled: _Optional[bool] = ..., history_size: _Optional[int] = ..., warning_threshold: _Optional[int] = ..., critical_threshold: _Optional[int] = ..., unknown_tool_threshold: _Optional[int] = ..., global_circuit_breaker_threshold: _Optional[int] = ..., generic_repeat: _Optional[bool] = ..., known_poll_no_progress: _Optional[bool] = ..., ping_pong: _Optional[bool] = ..., post_compaction_window_size: _Optional[int] = ..., abort_after_blocks: _Optional[int] = ..., run_wide_breaker_threshold: _Optional[int] = ..., shadow_mode: _Optional[bool] = ..., argument_churn_warn_at: _Optional[int] = ..., argument_churn_block_at: _Optional[int] = ..., error_repeat_threshold: _Optional[int] = ..., preset: _Optional[str] = ..., ping_pong_needs_answers: _Optional[bool] = ..., same_outcome_block_at: _Optional[int] = ..., same_outcome_inconclusive_block_at: _Optional[int] = ..., duplicate_side_effect: _Optional[bool] = ..., tool_rules: _Optional[_Iterable[_Union[ToolRule, _Mapping]]] = ..., cycle_warn_after: _Optional[int] = ..., cycle_block_after: _Optional[int] = ..., exec_failure_streak: _Optional[bool] = ..., failure_cascade_threshold: _Optional[int] = ..., parallel_batches: _Optional[bool] = ..., critical_scope: _Optional[str] = ..., progress_resets_repeats: _Optional[bool] = ..., user_turn_resets: _Optional[bool] = ..., run_tree_max_depth: _Optional[int] = ..., run_tree_max_children: _Optional[int] = ..., budget_tool_calls_per_run: _Optional[int] = ..., budget_tool_calls_per_tree: _Optional[int] = ..., budget_tool_seconds_per_tree: _Optional[int] = ..., budget_tokens_per_tree: _Optional[int] = ..., budget_cost_usd_per_tree: _Optional[float] = ..., budget_wall_seconds_per_tree: _Optional[int] = ..., budget_warn_at: _Optional[float] = ..., on_budget: _Optional[str] = ..., on_critical: _Optional[str] = ..., ask_timeout_seconds: _Optional[int] = ..., exemption_ttl_seconds: _Optional[int] = ..., repeated_output_warn_at: _Optional[int] = ..., repeated_output_abort_at: _Optional[int] = ..., repeated_output_chunk_chars: _Optional[int] = ..., repeated_output_chunk_repeats: _Optional[int] = ..., compaction_storm_abort_at: _Optional[int] = ..., stop_continuation_abort_at: _Optional[int] = ..., repeated_final_answer_warn_at: _Optional[int] = ..., repeated_final_answer_abort_at: _Optional[int] = ...) -> None: ...
