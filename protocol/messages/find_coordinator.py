"""FindCoordinator: the declaration of every supported version."""

from kbroker.protocol.schema import api

FIND_COORDINATOR = api(10, "FindCoordinator", "0-6", flexible="3+",
request="""
    key                                  string                         0-3
    key_type                             int8                           1+
    coordinator_keys                     []string                       4+
""",
response="""
    throttle_time_ms                     int32                          1+
    error_code                           int16                          0-3
    error_message                        string?                        1-3
    node_id                              int32                          0-3
    host                                 string                         0-3
    port                                 int32                          0-3
    coordinators                         [Coordinator]                  4+
      key                                string
      node_id                            int32
      host                               string
      port                               int32
      error_code                         int16
      error_message                      string?
""")

