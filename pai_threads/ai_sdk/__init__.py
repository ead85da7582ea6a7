"""The AI SDK UI-message stream endpoint: ``useChat`` talks to Django unchanged.

:mod:`.endpoint` holds the two views (the chat ``POST`` and the resume stream's ``GET``);
they call the services like every transport and stream the run from the realtime
subscription, resume included.
"""
