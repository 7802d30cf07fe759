"""The client simulator (VoltDB's windowing client): generator, session, reports, max tracker."""
