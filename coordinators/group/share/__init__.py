"""KIP-932 share groups in the group coordinator: membership and which partitions each member fetches."""
