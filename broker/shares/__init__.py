"""Share partitions (KIP-932): records of a partition handed to a share group's members one by one."""
