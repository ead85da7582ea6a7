"""The reference runtimes of issue 16 (LangGraph, the OpenAI Agents SDK) and the side-by-side
comparison with PAI.

``langgraph_ref`` and ``openai_agents_ref`` run in virtualenvs of their own and import only
``protocol`` and ``probes`` from here (standard library and psycopg); ``runner`` (creating the
virtualenvs, running a round), ``compare``, ``merge`` and ``side_by_side`` run in the
product's. See README.md beside this file.
"""
