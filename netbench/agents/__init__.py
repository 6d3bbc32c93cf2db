"""The agents: what starts a process on each host (launchers), the coordinator that hands them their
phases and reads their rows, the worker (agent and ranks) and their protocol."""
