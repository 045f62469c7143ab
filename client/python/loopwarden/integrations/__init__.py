"""Framework adapters: `loopwarden.integrations.langchain` (LangChain agents, LangGraph tool nodes)
and `loopwarden.integrations.openai_agents` (OpenAI Agents SDK).

Each is one constructor taking the same settings (daemon address, `agent_id`, bearer `token`,
`fail_open`, TLS material) and imports its framework only when imported itself; the extras
`loopwarden-client[langchain]` and `loopwarden-client[openai-agents]` install the framework
versions the adapters are tested against.
"""
