"""The transaction coordinator: transactional ids as an explicit state machine replayed from __transaction_state."""
