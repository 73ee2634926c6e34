"""Bootstraps moto's server in its authenticated mode, and asks it for
temporary credentials, with boto3 as the signer (so the judge of our own
SigV4 code is not our own code).

moto verifies signatures and session tokens once INITIAL_NO_AUTH_ACTION_COUNT
unauthenticated calls are spent; `bootstrap` makes exactly BOOTSTRAP_CALLS of
them (cluster_harness::Moto starts moto with that count), all in IAM:

1. CreateUser, 2. CreateAccessKey, 3. PutUserPolicy (what the tests call),
4. CreateRole, whose trust policy names the user's ARN (moto refused one
   naming the account root), 5. PutRolePolicy (what the role may call).

Usage (moto's venv python, which has boto3):
  moto_auth.py bootstrap URL
      prints {"access_key_id", "secret_access_key", "user_arn", "role_arn"}
  moto_auth.py assume-role URL ACCESS_KEY_ID SECRET ROLE_ARN [SESSION_NAME]
      a signed sts:AssumeRole; prints {"access_key_id", "secret_access_key",
      "session_token", "expiration"}
  moto_auth.py create-volume URL ACCESS_KEY_ID SECRET REGION ZONE
      a signed ec2:CreateVolume (1 GiB); prints the volume ID
  moto_auth.py create-volumes URL ACCESS_KEY_ID SECRET REGION ZONE COUNT
      COUNT of them in one process; prints one volume ID per line
  moto_auth.py run-instance URL ACCESS_KEY_ID SECRET REGION
      a signed ec2:RunInstances (one instance); prints {"instance_id",
      "private_dns_name"}
"""

import json
import sys

import boto3

BOOTSTRAP_CALLS = 5

# What the tests' programs call: ECR logins, EBS lookups (and the volumes the
# tests create for them), node-ip-helper's private DNS name (and the instance
# the test creates for it), and assuming the role.
ALLOWED = [
    "ecr:GetAuthorizationToken",
    "ec2:DescribeVolumes",
    "ec2:CreateVolume",
    "ec2:DescribeInstances",
    "ec2:RunInstances",
    "sts:AssumeRole",
]


def client(service, url, key=None, secret=None, token=None, region="us-east-1"):
    return boto3.client(
        service,
        endpoint_url=url,
        region_name=region,
        aws_access_key_id=key or "bootstrap",
        aws_secret_access_key=secret or "bootstrap",
        aws_session_token=token,
    )


def policy(actions):
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
        }
    )


def bootstrap(url):
    iam = client("iam", url)
    user = iam.create_user(UserName="test-node")["User"]
    key = iam.create_access_key(UserName="test-node")["AccessKey"]
    iam.put_user_policy(UserName="test-node", PolicyName="test-node", PolicyDocument=policy(ALLOWED))
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": user["Arn"]},
                "Action": ["sts:AssumeRole", "sts:AssumeRoleWithWebIdentity"],
            }
        ],
    }
    role = iam.create_role(RoleName="ecr-puller", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    iam.put_role_policy(RoleName="ecr-puller", PolicyName="ecr-puller", PolicyDocument=policy(ALLOWED))
    print(
        json.dumps(
            {
                "access_key_id": key["AccessKeyId"],
                "secret_access_key": key["SecretAccessKey"],
                "user_arn": user["Arn"],
                "role_arn": role["Arn"],
            }
        )
    )


def assume_role(url, key, secret, role_arn, session="test-session"):
    sts = client("sts", url, key, secret)
    credentials = sts.assume_role(RoleArn=role_arn, RoleSessionName=session)["Credentials"]
    print(
        json.dumps(
            {
                "access_key_id": credentials["AccessKeyId"],
                "secret_access_key": credentials["SecretAccessKey"],
                "session_token": credentials["SessionToken"],
                "expiration": credentials["Expiration"].strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
    )


def create_volume(url, key, secret, region, zone):
    ec2 = client("ec2", url, key, secret, region=region)
    print(ec2.create_volume(AvailabilityZone=zone, Size=1)["VolumeId"])


def create_volumes(url, key, secret, region, zone, count):
    ec2 = client("ec2", url, key, secret, region=region)
    for _ in range(int(count)):
        print(ec2.create_volume(AvailabilityZone=zone, Size=1)["VolumeId"])


def run_instance(url, key, secret, region):
    ec2 = client("ec2", url, key, secret, region=region)
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)["Instances"][0]
    print(json.dumps({"instance_id": instance["InstanceId"], "private_dns_name": instance["PrivateDnsName"]}))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    commands = {
        "bootstrap": bootstrap,
        "assume-role": assume_role,
        "create-volume": create_volume,
        "create-volumes": create_volumes,
        "run-instance": run_instance,
    }
    commands[command](*args)
