import type { MigrationObject } from "@mikro-orm/core";
import { Migration20261121074008_initial } from "./Migration20261121074008_initial.ts";
import { Migration20261121075837_webhooks } from "./Migration20261121075837_webhooks.ts";
import { Migration20261121091950_outbox_notify_per_row } from "./Migration20261121091950_outbox_notify_per_row.ts";
import { Migration20261123033729_delivery_republish_installation } from "./Migration20261123033729_delivery_republish_installation.ts";
import { Migration20261123082541_payment_lifecycle } from "./Migration20261123082541_payment_lifecycle.ts";
import { Migration20261123091127_site_credentials } from "./Migration20261123091127_site_credentials.ts";
import { Migration20261123091322_qr_configurations } from "./Migration20261123091322_qr_configurations.ts";
import { Migration20261123092813_terminal } from "./Migration20261123092813_terminal.ts";
import { Migration20261123142521_RotateSigningSecret } from "./Migration20261123142521_RotateSigningSecret.ts";
import { Migration20261123170137_CredentialChangedNotify } from "./Migration20261123170137_CredentialChangedNotify.ts";
import { Migration20261124150204_SecretKeyCheck } from "./Migration20261124150204_SecretKeyCheck.ts";
import { Migration20261124152937_ChainEnvironmentInternalRoles } from "./Migration20261124152937_ChainEnvironmentInternalRoles.ts";
import { Migration20261124203005_ChainWatchers } from "./Migration20261124203005_ChainWatchers.ts";
import { Migration20261125054905_EndpointEnabledAt } from "./Migration20261125054905_EndpointEnabledAt.ts";
import { Migration20261125084334_MerchantPolicy } from "./Migration20261125084334_MerchantPolicy.ts";
import { Migration20261126090000_WatchedCommitOrder } from "./Migration20261126090000_WatchedCommitOrder.ts";
import { Migration20261126090100_InternalCredentialExpiry } from "./Migration20261126090100_InternalCredentialExpiry.ts";
import { Migration20261126095500_LeaseEpoch } from "./Migration20261126095500_LeaseEpoch.ts";
import { Migration20261126094500_RejectedObservations } from "./Migration20261126094500_RejectedObservations.ts";
import { Migration20261126091000_ChainNodeIdentity } from "./Migration20261126091000_ChainNodeIdentity.ts";
import { Migration20261126093000_IntentReturnUrls } from "./Migration20261126093000_IntentReturnUrls.ts";

/** Every migration, in order. `npm run migration:create` writes a new file; add it here. */
export const migrations: MigrationObject[] = [
  { name: "Migration20261121074008_initial", class: Migration20261121074008_initial },
  { name: "Migration20261121075837_webhooks", class: Migration20261121075837_webhooks },
  { name: "Migration20261121091950_outbox_notify_per_row", class: Migration20261121091950_outbox_notify_per_row },
  { name: "Migration20261123033729_delivery_republish_installation", class: Migration20261123033729_delivery_republish_installation },
  { name: "Migration20261123082541_payment_lifecycle", class: Migration20261123082541_payment_lifecycle },
  { name: "Migration20261123091127_site_credentials", class: Migration20261123091127_site_credentials },
  { name: "Migration20261123091322_qr_configurations", class: Migration20261123091322_qr_configurations },
  { name: "Migration20261123092813_terminal", class: Migration20261123092813_terminal },
  { name: "Migration20261123142521_RotateSigningSecret", class: Migration20261123142521_RotateSigningSecret },
  { name: "Migration20261123170137_CredentialChangedNotify", class: Migration20261123170137_CredentialChangedNotify },
  { name: "Migration20261124150204_SecretKeyCheck", class: Migration20261124150204_SecretKeyCheck },
  { name: "Migration20261124152937_ChainEnvironmentInternalRoles", class: Migration20261124152937_ChainEnvironmentInternalRoles },
  { name: "Migration20261124203005_ChainWatchers", class: Migration20261124203005_ChainWatchers },
  { name: "Migration20261125054905_EndpointEnabledAt", class: Migration20261125054905_EndpointEnabledAt },
  { name: "Migration20261125084334_MerchantPolicy", class: Migration20261125084334_MerchantPolicy },
  { name: "Migration20261126090000_WatchedCommitOrder", class: Migration20261126090000_WatchedCommitOrder },
  { name: "Migration20261126090100_InternalCredentialExpiry", class: Migration20261126090100_InternalCredentialExpiry },
  { name: "Migration20261126091000_ChainNodeIdentity", class: Migration20261126091000_ChainNodeIdentity },
  { name: "Migration20261126093000_IntentReturnUrls", class: Migration20261126093000_IntentReturnUrls },
  { name: "Migration20261126094500_RejectedObservations", class: Migration20261126094500_RejectedObservations },
  { name: "Migration20261126095500_LeaseEpoch", class: Migration20261126095500_LeaseEpoch },
];
