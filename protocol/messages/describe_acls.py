"""DescribeAcls: the declaration of every supported version."""

from kbroker.protocol.schema import api

DESCRIBE_ACLS = api(29, "DescribeAcls", "0-3", flexible="2+",
request="""
    resource_type_filter                 int8
    resource_name_filter                 string?
    pattern_type_filter                  int8           1+              =3
    principal_filter                     string?
    host_filter                          string?
    operation                            int8
    permission_type                      int8
""",
response="""
    throttle_time_ms                     int32
    error_code                           int16
    error_message                        string?                        =null
    resources                            [DescribeAclsResource]
      resource_type                      int8
      resource_name                      string
      pattern_type                       int8           1+              =3
      acls                               [AclDescription]
        principal                        string
        host                             string
        operation                        int8
        permission_type                  int8
""")
