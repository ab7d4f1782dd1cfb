"""The embedded node: runs Pods as supervised local processes (``agent.NodeAgent``).

Modules named in ``entry.py`` (``supervisor``, ``isolation``, ``memory``, ``podexec``) use only the
standard library, because supervisors load them without the package for a fast start.
"""
