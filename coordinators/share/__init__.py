"""The share coordinator (KIP-932): the durable state of share partitions, in ``__share_group_state``."""
