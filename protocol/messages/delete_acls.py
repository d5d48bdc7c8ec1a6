"""DeleteAcls: the declaration of every supported version."""

from kbroker.protocol.schema import api

DELETE_ACLS = api(31, "DeleteAcls", "0-3", flexible="2+",
request="""
    filters                              [DeleteAclsFilter]
      resource_type_filter               int8
      resource_name_filter               string?
      pattern_type_filter                int8           1+              =3
      principal_filter                   string?
      host_filter                        string?
      operation                          int8
      permission_type                    int8
""",
response="""
    throttle_time_ms                     int32
    filter_results                       [DeleteAclsFilterResult]
      error_code                         int16
      error_message                      string?                        =null
      matching_acls                      [DeleteAclsMatchingAcl]
        error_code                       int16
        error_message                    string?                        =null
        resource_type                    int8
        resource_name                    string
        pattern_type                     int8           1+              =3
        principal                        string
        host                             string
        operation                        int8
        permission_type                  int8
""")
