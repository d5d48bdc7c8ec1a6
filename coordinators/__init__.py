"""Group and transaction coordinators (state machines replayed from their internal topics). Not built yet."""
