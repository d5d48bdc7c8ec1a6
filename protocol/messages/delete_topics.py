"""DeleteTopics: the declaration of every supported version."""

from kbroker.protocol.schema import api

DELETE_TOPICS = api(20, "DeleteTopics", "1-6", flexible="4+",
request="""
    topics                               [DeleteTopicState]             6+
      name                               string?                        =null
      topic_id                           uuid
    topic_names                          []string                       1-5
    timeout_ms                           int32
""",
response="""
    throttle_time_ms                     int32
    responses                            [DeletableTopicResult]
      name                               string?6+
      topic_id                           uuid                           6+
      error_code                         int16
      error_message                      string?                        5+ =null
""")

