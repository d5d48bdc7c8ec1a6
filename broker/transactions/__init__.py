"""Transactions' broker side: producer ids, transaction markers appended as a partition leader, and the requests this broker sends to leaders and coordinators."""
