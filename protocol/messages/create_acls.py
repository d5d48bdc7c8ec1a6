"""CreateAcls: the declaration of every supported version."""

from kbroker.protocol.schema import api

CREATE_ACLS = api(30, "CreateAcls", "0-3", flexible="2+",
request="""
    creations                            [AclCreation]
      resource_type                      int8
      resource_name                      string
      resource_pattern_type              int8           1+              =3
      principal                          string
      host                               string
      operation                          int8
      permission_type                    int8
""",
response="""
    throttle_time_ms                     int32
    results                              [AclCreationResult]
      error_code                         int16
      error_message                      string?                        =null
""")
