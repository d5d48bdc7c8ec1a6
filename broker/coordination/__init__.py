"""The coordinators' home on this broker: their internal topics made on first use, their shards loaded and
unloaded with leadership of those topics' partitions, and the error a client hears while a shard is not
here."""
