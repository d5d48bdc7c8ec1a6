"""Records of __consumer_offsets: offset commits and group metadata, keyed and versioned as Kafka writes them.

The key's version (int16) precedes the key; the value's version precedes the value.
"""

from kbroker.protocol.schema import data

OFFSET_COMMIT_KEY = data("OffsetCommitKey", "0-1", flexible=None, fields="""
    group                                string
    topic                                string
    partition                            int32
""")


OFFSET_COMMIT_VALUE = data("OffsetCommitValue", "0-4", flexible="4+", fields="""
    offset                               int64
    leader_epoch                         int32                          3+ =-1
    metadata                             string
    commit_timestamp                     int64
    expire_timestamp                     int64                          1 =-1
""")


GROUP_METADATA_KEY = data("GroupMetadataKey", "2-2", flexible=None, fields="""
    group                                string
""")


GROUP_METADATA_VALUE = data("GroupMetadataValue", "0-4", flexible="4+", fields="""
    protocol_type                        string
    generation                           int32
    protocol                             string?
    leader                               string?
    current_state_timestamp              int64                          2+ =-1
    members                              [MemberMetadata]
      member_id                          string
      group_instance_id                  string?                        3+ =null
      client_id                          string
      client_host                        string
      rebalance_timeout                  int32                          1+ =-1
      session_timeout                    int32
      subscription                       bytes
      assignment                         bytes
""")
