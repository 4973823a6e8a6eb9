#include "rentals/inventory.h"

#include <gtest/gtest.h>

namespace gpuhub::rentals {
namespace {

Node MakeNode(NodeId id, int cards, NodeState state = NodeState::kActive) {
  Node n;
  n.id = id;
  n.gpu = "H100 SXM";
  n.region = "DFW-1";
  n.cards = cards;
  n.state = state;
  return n;
}

TEST(InventoryTest, FreeBlocksCountsAlignedFreeBlocksOnly) {
  EXPECT_EQ(Inventory::FreeBlocks(0, 8, 8), 1);
  EXPECT_EQ(Inventory::FreeBlocks(0, 8, 2), 4);
  EXPECT_EQ(Inventory::FreeBlocks(0b0000'0001, 8, 8), 0);
  EXPECT_EQ(Inventory::FreeBlocks(0b0000'0001, 8, 4), 1);
  // Cards 1 and 2 are free but not an aligned pair.
  EXPECT_EQ(Inventory::FreeBlocks(0b1111'1001, 8, 2), 0);
  EXPECT_EQ(Inventory::FreeBlocks(0b1111'1001, 8, 1), 2);
  // A 7-card node: three pairs, one quad, no eight.
  EXPECT_EQ(Inventory::FreeBlocks(0, 7, 2), 3);
  EXPECT_EQ(Inventory::FreeBlocks(0, 7, 4), 1);
  EXPECT_EQ(Inventory::FreeBlocks(0, 7, 8), 0);
}

TEST(InventoryTest, BestBlockFillsHolesBeforeSplittingBigBlocks) {
  // Cards 0 and 1 used: a single card goes next to them (card 2), not into the free upper quad.
  EXPECT_EQ(Inventory::BestBlock(0b0000'0011, 8, 1), 0b0000'0100u);
  // Card 2 used: a single goes to card 3 (its pair's buddy), keeping pairs 0-1 and 4-7 whole.
  EXPECT_EQ(Inventory::BestBlock(0b0000'0100, 8, 1), 0b0000'1000u);
  // A pair goes into the quad that is already half used.
  EXPECT_EQ(Inventory::BestBlock(0b0001'0000, 8, 2), 0b1100'0000u);
  EXPECT_EQ(Inventory::BestBlock(0, 8, 8), 0xffu);
  EXPECT_FALSE(Inventory::BestBlock(0b0000'0001, 8, 8).has_value());
  EXPECT_FALSE(Inventory::BestBlock(0, 8, 3).has_value());
}

TEST(InventoryTest, NeverBreaksAWholeFreeNodeWhileAPartlyUsedOneFits) {
  Inventory inv;
  inv.Add(MakeNode(1, 8), 0, 0);
  inv.Add(MakeNode(2, 8), 0, 0);
  inv.Add(MakeNode(3, 8), 0, 0);
  inv.Take(3, 0b0000'1111);  // node 3: 4 free
  inv.Take(2, 0b0000'0011);  // node 2: 6 free
  auto p = inv.Find(0, 0, 2);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->node_id, 3);  // fewest free cards among the partly used ones
  EXPECT_EQ(p->card_mask, 0b0011'0000u);
  auto four = inv.Find(0, 0, 4);
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(four->node_id, 3);
  auto eight = inv.Find(0, 0, 8);
  ASSERT_TRUE(eight.has_value());
  EXPECT_EQ(eight->node_id, 1);  // the only whole node
  inv.Take(3, 0b1111'0000);
  inv.Take(2, 0b1111'1100);
  // Every partly used node is full now: a single card breaks the whole node 1.
  auto single = inv.Find(0, 0, 1);
  ASSERT_TRUE(single.has_value());
  EXPECT_EQ(single->node_id, 1);
  EXPECT_EQ(single->card_mask, 1u);
}

TEST(InventoryTest, StockCountsActiveNodesOnlyAndFollowsEveryChange) {
  Inventory inv;
  inv.Add(MakeNode(1, 8), 0, 0);
  inv.Add(MakeNode(2, 8), 0, 0);
  inv.Add(MakeNode(3, 7), 0, 0);
  StockRow s = inv.Stock(0, 0);
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.cards_free, 23);
  EXPECT_EQ(s.Sets(8), 2);
  EXPECT_EQ(s.Sets(4), 5);
  EXPECT_EQ(s.Sets(1), 23);
  inv.Take(1, 0b0000'0001);
  s = inv.Stock(0, 0);
  EXPECT_EQ(s.cards_free, 22);
  EXPECT_EQ(s.Sets(8), 1);
  EXPECT_EQ(s.Sets(4), 4);
  EXPECT_EQ(s.Sets(2), 10);
  inv.SetState(2, NodeState::kDraining, 5);
  s = inv.Stock(0, 0);
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.nodes_draining, 1);
  EXPECT_EQ(s.cards_free, 14);
  EXPECT_EQ(s.Sets(8), 0);
  // A draining node takes no new rentals.
  auto p = inv.Find(0, 0, 8);
  EXPECT_FALSE(p.has_value());
  inv.Free(1, 0b0000'0001);
  EXPECT_EQ(inv.Stock(0, 0).Sets(8), 1);
  EXPECT_TRUE(inv.CheckConsistency().ok());
  // Another region of the same card is a separate group.
  EXPECT_EQ(inv.Stock(0, 1).nodes, 0);
  EXPECT_FALSE(inv.Find(0, 1, 1).has_value());
  EXPECT_TRUE(inv.Find(0, -1, 1).has_value());
}

}  // namespace
}  // namespace gpuhub::rentals
