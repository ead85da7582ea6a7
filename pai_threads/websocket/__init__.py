"""The thread websocket: ``ws/pai/threads/<thread_id>/`` (docs/realtime.md).

* :mod:`.consumers`: :class:`ThreadConsumer`: the connect-time snapshot, sequenced events
  with gap detection and refill from the replay buffer, commands;
* :mod:`.commands`: what a client may send (send, cancel, answer, regenerate), each a call
  of an operation;
* :mod:`.snapshot`: the connect-time snapshot; :mod:`.frames`: the frames' shapes and
  errors; :mod:`.identity`: the connection's identity, resolved like a request's.
"""
