"""loopwarden for the OpenAI Agents SDK: a tool input guardrail asks before each function tool runs,
a tool output guardrail reports what it returned, agent hooks place sub-agents and report the
model's token usage, and (with `ask=True`) an approval gate hands critical loops to a person.

    guard = LoopwardenGuardrails("127.0.0.1:50051", agent_id="coder")
    agent = guard.protect(Agent(name="coder", tools=[read_file]))
    result = await Runner.run(agent, "fix the build", max_turns=50)

`max_turns` above the critical threshold (the SDK's default of 10 ends the run before loopwarden's
warning at the 11th identical call and its block at the 21st: docs/integrations/openai-agents.md).

`protect` adds both guardrails to every function tool of an agent (and of the agents it hands off
to or runs as tools), of a tool, or of a list of tools, and loopwarden's hooks to every agent;
`guard.tool_input_guardrail` and `guard.tool_output_guardrail` can also be given to
`function_tool(...)` directly (tool guarding only). Everything runs on the asyncio client.

- WARN (announced): the tool runs; the output guardrail appends the warning to a text result
  (`reject_content` with the result and the warning: the SDK's one way to change what the model
  reads). A non-text result is passed on as it is and the warning only logged.
- BLOCK: the input guardrail rejects the call with the block message as its result
  (`reject_content`); the tool does not run.
- ASK (`ask=True` and `loopwarden.onCritical: "ask"` or `onBudget: "ask"`): the call's
  `needs_approval` says yes, so the SDK interrupts the run (`result.interruptions`; the daemon's
  message is `guard.question(item)`). `RunState.approve(item)` and a new `Runner.run` on the state
  run the call and send the `approval` (`always_approve=True`: scope ALWAYS); `RunState.reject`
  sends the denial.
- ABORT: the guardrail trips (`raise_exception`), so `Runner.run` raises the SDK's
  `ToolInputGuardrailTripwireTriggered` (or `ToolOutputGuardrailTripwireTriggered` when the outcome
  ended the run); `.output.output_info` holds the decision as a dict.
- Daemon unreachable: the tool runs unguarded; with `fail_open=False` the input guardrail trips.

Runs (loopwarden.integrations.openai_agents._runs): the root run is the run's trace id, or with
tracing off the `RunConfig.group_id` (also sent as the session id), or one made per run. Handoff
targets and agents run as tools are child runs; every model response (`on_llm_end`) is a
`model_output` event of the agent's run, its output text (a `final_answer` when it calls no tool,
else a `message`) with its token usage, for the detectors of loops without tool calls and the
token budgets (a response with no text: a `usage` event); a later `Runner.run` on the same root is
a `user_turn`. A model output's ABORT raises `loopwarden.RunAborted` out of `Runner.run`; its
announced WARN is logged (the response is the model's already).
"""
from ._guardrails import LoopwardenGuardrails

__all__ = ["LoopwardenGuardrails"]
