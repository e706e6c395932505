"""Generated index of KRaft metadata record codecs by api key. Do not edit."""

from __future__ import annotations

from typing import Any

from moldau.protocol.metadata_records.abort_transaction_record import AbortTransactionRecord
from moldau.protocol.metadata_records.access_control_entry_record import AccessControlEntryRecord
from moldau.protocol.metadata_records.begin_transaction_record import BeginTransactionRecord
from moldau.protocol.metadata_records.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from moldau.protocol.metadata_records.client_quota_record import ClientQuotaRecord
from moldau.protocol.metadata_records.config_record import ConfigRecord
from moldau.protocol.metadata_records.delegation_token_record import DelegationTokenRecord
from moldau.protocol.metadata_records.end_transaction_record import EndTransactionRecord
from moldau.protocol.metadata_records.feature_level_record import FeatureLevelRecord
from moldau.protocol.metadata_records.fence_broker_record import FenceBrokerRecord
from moldau.protocol.metadata_records.no_op_record import NoOpRecord
from moldau.protocol.metadata_records.partition_change_record import PartitionChangeRecord
from moldau.protocol.metadata_records.partition_record import PartitionRecord
from moldau.protocol.metadata_records.producer_ids_record import ProducerIdsRecord
from moldau.protocol.metadata_records.register_broker_record import RegisterBrokerRecord
from moldau.protocol.metadata_records.register_controller_record import RegisterControllerRecord
from moldau.protocol.metadata_records.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from moldau.protocol.metadata_records.remove_delegation_token_record import (
    RemoveDelegationTokenRecord,
)
from moldau.protocol.metadata_records.remove_topic_record import RemoveTopicRecord
from moldau.protocol.metadata_records.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from moldau.protocol.metadata_records.topic_record import TopicRecord
from moldau.protocol.metadata_records.unfence_broker_record import UnfenceBrokerRecord
from moldau.protocol.metadata_records.unregister_broker_record import UnregisterBrokerRecord
from moldau.protocol.metadata_records.user_scram_credential_record import UserScramCredentialRecord
from moldau.protocol.metadata_records.zk_migration_state_record import ZkMigrationStateRecord

RECORDS: dict[int, Any] = {
    0: RegisterBrokerRecord,
    1: UnregisterBrokerRecord,
    2: TopicRecord,
    3: PartitionRecord,
    4: ConfigRecord,
    5: PartitionChangeRecord,
    7: FenceBrokerRecord,
    8: UnfenceBrokerRecord,
    9: RemoveTopicRecord,
    10: DelegationTokenRecord,
    11: UserScramCredentialRecord,
    12: FeatureLevelRecord,
    14: ClientQuotaRecord,
    15: ProducerIdsRecord,
    17: BrokerRegistrationChangeRecord,
    18: AccessControlEntryRecord,
    19: RemoveAccessControlEntryRecord,
    20: NoOpRecord,
    21: ZkMigrationStateRecord,
    22: RemoveUserScramCredentialRecord,
    23: BeginTransactionRecord,
    24: EndTransactionRecord,
    25: AbortTransactionRecord,
    26: RemoveDelegationTokenRecord,
    27: RegisterControllerRecord,
}
