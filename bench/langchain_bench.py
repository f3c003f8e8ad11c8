"""LangChain's side of the comparison (bench/compare.sh runs it next to ours).

The same agent shapes as `tinyagents/benches/compare.rs`, on LangChain v1's
`create_agent` with a fake chat model, timed the same way (median of repeated
runs), printed as one JSON object of microseconds.
"""

import json
import statistics
import sys
import time

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool


class FakeModel(GenericFakeChatModel):
    """A fake chat model that accepts tools (create_agent binds them)."""

    def bind_tools(self, tools, **kwargs):  # noqa: D401 - same model, tools ignored
        return self


def replies(make):
    """An endless iterator of replies (each agent run consumes one or two)."""
    while True:
        yield from make()


def text_model(text="done"):
    return FakeModel(messages=replies(lambda: [AIMessage(content=text)]))


def noop_before_after(i):
    def before_model(self, state, runtime):
        return None

    def after_model(self, state, runtime):
        return None

    return type(f"Noop{i}", (AgentMiddleware,), {"before_model": before_model, "after_model": after_model})()


def pass_wrap(i):
    def wrap_model_call(self, request, handler):
        return handler(request)

    return type(f"Pass{i}", (AgentMiddleware,), {"wrap_model_call": wrap_model_call})()


@tool
def echo(x: int) -> str:
    """Echoes x."""
    return str(x)


def median_us(rounds, f):
    for _ in range(max(1, rounds // 10)):
        f()
    samples = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        samples.append((time.perf_counter() - t) * 1e6)
    return statistics.median(samples)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    msg = {"messages": [HumanMessage(content="hi")]}

    plain = create_agent(model=text_model())
    hooks = create_agent(model=text_model(), middleware=[noop_before_after(i) for i in range(10)])
    wraps = create_agent(model=text_model(), middleware=[pass_wrap(i) for i in range(10)])
    trip = create_agent(
        model=FakeModel(
            messages=replies(
                lambda: [
                    AIMessage(content="", tool_calls=[{"name": "echo", "args": {"x": 1}, "id": "c1"}]),
                    AIMessage(content="done"),
                ]
            )
        ),
        tools=[echo],
    )
    one = create_agent(model=text_model("tok"))
    thousand = create_agent(model=text_model(" ".join(["tok"] * 1000)))

    def stream(agent):
        for _ in agent.stream(msg, stream_mode="messages"):
            pass

    base = median_us(rounds, lambda: plain.invoke(msg))
    with_hooks = median_us(rounds, lambda: hooks.invoke(msg))
    with_wraps = median_us(rounds, lambda: wraps.invoke(msg))
    tool_trip = median_us(rounds, lambda: trip.invoke(msg))
    stream1 = median_us(max(5, rounds // 4), lambda: stream(one))
    stream1000 = median_us(max(5, rounds // 20), lambda: stream(thousand))
    print(
        json.dumps(
            {
                "agent_turn_us": base,
                "agent_turn_10_noop_before_after_us": with_hooks,
                "per_hook_us": (with_hooks - base) / 20.0,
                "agent_turn_10_wraps_us": with_wraps,
                "per_wrap_layer_us": (with_wraps - base) / 10.0,
                "tool_round_trip_us": tool_trip,
                "stream_1000_tokens_us": stream1000,
                "per_token_us": (stream1000 - stream1) / 999.0,
            }
        )
    )


if __name__ == "__main__":
    main()
