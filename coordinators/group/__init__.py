"""The group coordinator: consumer groups as an explicit state machine replayed from __consumer_offsets."""
